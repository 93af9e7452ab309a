<?php

declare(strict_types=1);

namespace MongoInline;

/**
 * Any failure of the driver or of this binding: the server's code (0 if
 * none) as getCode(), and the error labels.
 */
class Exception extends \RuntimeException
{
    /** @var list<string> */
    private array $labels;

    /** What else the library reported (a client bulk write's writeErrors, writeConcernErrors and partialResult), or null. */
    private ?array $details = null;

    /** The library's mi_error this was made from, until freed or handed back. */
    private ?\FFI\CData $raw = null;

    /** @param list<string> $labels */
    public function __construct(string $message, int $code = 0, array $labels = [], ?\Throwable $previous = null)
    {
        parent::__construct($message, $code, $previous);
        $this->labels = $labels;
    }

    /** @return list<string> */
    public function getErrorLabels(): array
    {
        return $this->labels;
    }

    /** Whether the error carries $label (e.g. "TransientTransactionError"). */
    public function hasErrorLabel(string $label): bool
    {
        return in_array($label, $this->labels, true);
    }

    /**
     * What else the library reported, or null: for Client::bulkWrite,
     * ['writeErrors' => [index => ['code', 'message']], 'writeConcernErrors' => [...], 'partialResult' => [...]?].
     */
    public function getDetails(): ?array
    {
        return $this->details;
    }

    public function __destruct()
    {
        $raw = $this->takeRaw();
        if ($raw !== null) {
            Library::ffi()->mi_error_free($raw);
        }
    }

    /** @internal the library's error, now the caller's to free or hand over */
    public function takeRaw(): ?\FFI\CData
    {
        $raw = $this->raw;
        $this->raw = null;
        return $raw;
    }

    /** @param list<string> $labels */
    public static function fromDomain(int $domain, string $message, int $code, array $labels, ?\FFI\CData $raw = null, ?array $details = null): self
    {
        $class = match ($domain) {
            1 => InvalidArgumentException::class,
            2 => NetworkException::class,
            3 => CommandException::class,
            4 => WriteException::class,
            5 => ServerSelectionException::class,
            6 => TimeoutException::class,
            7 => ProtocolException::class,
            8 => AuthenticationException::class,
            9 => TlsException::class,
            10 => IncompatibleServerException::class,
            11 => LogicException::class,
            default => InternalException::class,
        };
        $exception = new $class($message, $code, $labels);
        $exception->raw = $raw;
        $exception->details = $details;
        return $exception;
    }
}
