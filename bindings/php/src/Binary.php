<?php

declare(strict_types=1);

namespace MongoInline;

/** BSON binary data: bytes and a subtype (0 generic, 4 UUID, 0x80+ user). */
final class Binary implements \JsonSerializable
{
    public function __construct(public readonly string $data, public readonly int $subtype = 0)
    {
        if ($subtype < 0 || $subtype > 255) {
            throw new InvalidArgumentException('a binary subtype is 0 to 255');
        }
    }

    /** Extended JSON. */
    public function jsonSerialize(): array
    {
        return ['$binary' => ['base64' => base64_encode($this->data), 'subType' => sprintf('%02x', $this->subtype)]];
    }
}
