<?php

declare(strict_types=1);

namespace MongoInline;

/** A BSON ObjectId: 12 bytes, written as 24 hex digits. */
final class ObjectId implements \JsonSerializable, \Stringable
{
    /** The 12 bytes. */
    public readonly string $bytes;

    /** From 24 hex digits, or a new one (time, random, counter) when null. */
    public function __construct(?string $hex = null)
    {
        if ($hex === null) {
            static $counter = null;
            $counter = (($counter ?? random_int(0, 0xFFFFFF)) + 1) & 0xFFFFFF;
            $this->bytes = pack('N', time()) . random_bytes(5) . substr(pack('N', $counter), 1);
            return;
        }
        if (!preg_match('/\A[0-9a-fA-F]{24}\z/', $hex)) {
            throw new InvalidArgumentException('an ObjectId is 24 hexadecimal digits');
        }
        $this->bytes = hex2bin($hex);
    }

    public function __toString(): string
    {
        return bin2hex($this->bytes);
    }

    /** Extended JSON. */
    public function jsonSerialize(): array
    {
        return ['$oid' => bin2hex($this->bytes)];
    }
}
