<?php

declare(strict_types=1);

namespace MongoInline;

/** A BSON date: milliseconds since the Unix epoch, UTC. */
final class UTCDateTime implements \JsonSerializable
{
    public function __construct(public readonly int $milliseconds)
    {
    }

    public static function fromDateTime(\DateTimeInterface $time): self
    {
        // 'U' is the floor of the seconds and 'u' counts up from it, also before 1970.
        return new self($time->getTimestamp() * 1000 + intdiv((int) $time->format('u'), 1000));
    }

    public function toDateTime(): \DateTimeImmutable
    {
        $seconds = intdiv($this->milliseconds, 1000);
        $millis = $this->milliseconds - $seconds * 1000;
        if ($millis < 0) {
            $seconds -= 1;
            $millis += 1000;
        }
        return \DateTimeImmutable::createFromFormat('U.v', sprintf('%d.%03d', $seconds, $millis), new \DateTimeZone('UTC'));
    }

    /** Extended JSON. */
    public function jsonSerialize(): array
    {
        return ['$date' => ['$numberLong' => (string) $this->milliseconds]];
    }
}
