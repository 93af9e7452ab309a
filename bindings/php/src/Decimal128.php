<?php

declare(strict_types=1);

namespace MongoInline;

/** A BSON decimal128, carried as its 16 bytes (this binding does no decimal arithmetic). */
final class Decimal128
{
    public function __construct(public readonly string $bytes)
    {
        if (strlen($bytes) !== 16) {
            throw new InvalidArgumentException('a decimal128 is 16 bytes');
        }
    }
}
