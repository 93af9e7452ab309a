<?php

declare(strict_types=1);

namespace MongoInline;

/** A BSON regular expression: pattern and flags. */
final class Regex implements \JsonSerializable
{
    public function __construct(public readonly string $pattern, public readonly string $flags = '')
    {
    }

    /** Extended JSON. */
    public function jsonSerialize(): array
    {
        return ['$regularExpression' => ['pattern' => $this->pattern, 'options' => $this->flags]];
    }
}
