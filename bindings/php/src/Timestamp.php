<?php

declare(strict_types=1);

namespace MongoInline;

/** A BSON timestamp (the oplog's): seconds and an increment. */
final class Timestamp implements \JsonSerializable
{
    public function __construct(public readonly int $increment, public readonly int $timestamp)
    {
    }

    /** Extended JSON. */
    public function jsonSerialize(): array
    {
        return ['$timestamp' => ['t' => $this->timestamp, 'i' => $this->increment]];
    }
}
