<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/** An explicit session: causal consistency and transactions. */
final class Session extends Handle
{
    /**
     * defaultTimeoutMS bounds the session's commits and aborts that set no
     * timeoutMS of their own.
     *
     * @param array{causalConsistency?: bool, snapshot?: bool, defaultTimeoutMS?: int} $options
     */
    public function __construct(public readonly Client $client, array $options = [])
    {
        parent::__construct();
        foreach (array_keys($options) as $name) {
            if (!in_array($name, ['causalConsistency', 'snapshot', 'defaultTimeoutMS'], true)) {
                throw new InvalidArgumentException("unknown session option '$name'");
            }
        }
        $bson = $options === [] ? null : Bson::encode($options);
        $ffi = Library::ffi();
        $out = $ffi->new('mi_session *');
        Library::check($ffi->mi_session_start($client->handle(), $bson, $bson === null ? 0 : strlen($bson), \FFI::addr($out)));
        $this->ptr = $out;
    }

    protected function kind(): string
    {
        return 'session';
    }

    protected function free(CData $ptr): void
    {
        Library::ffi()->mi_session_free($ptr);
    }

    /** @internal the session's pointer for an operation of $client (null: none) */
    public static function pointer(mixed $session, Client $client): ?CData
    {
        if ($session === null) {
            return null;
        }
        if (!$session instanceof self) {
            throw new InvalidArgumentException("'session' must be a MongoInline\\Session, not " . get_debug_type($session));
        }
        if ($session->client !== $client) {
            throw new LogicException('the session belongs to another client');
        }
        return $session->live();
    }

    /** Ends the session (aborting an open transaction); as close(). */
    public function endSession(): void
    {
        $this->close();
    }

    /** The session's lsid, ['id' => Binary]. */
    public function getSessionId(): array
    {
        $ffi = Library::ffi();
        $out = $ffi->new('mi_buffer');
        Library::check($ffi->mi_session_id($this->live(), \FFI::addr($out)));
        return Library::takeBuffer($out);
    }

    /** Starts a transaction; options readConcern, writeConcern, maxCommitTimeMS. */
    public function startTransaction(array $options = []): void
    {
        $bson = $this->transactionOptions($options);
        Library::check(Library::ffi()->mi_session_start_transaction($this->live(), $bson, $bson === null ? 0 : strlen($bson)));
    }

    /** Commits the transaction (LogicException if none was started); option timeoutMS. */
    public function commitTransaction(array $options = []): void
    {
        Library::check(Library::ffi()->mi_session_commit_transaction($this->live(), ...self::timeoutOnly($options)));
    }

    /** Aborts the transaction (LogicException if none was started); option timeoutMS. */
    public function abortTransaction(array $options = []): void
    {
        Library::check(Library::ffi()->mi_session_abort_transaction($this->live(), ...self::timeoutOnly($options)));
    }

    /** @return array{?string, int} the options {timeoutMS} as BSON and its length */
    private static function timeoutOnly(array $options): array
    {
        foreach (array_keys($options) as $name) {
            if ($name !== 'timeoutMS') {
                throw new InvalidArgumentException("unknown option '$name'; known: timeoutMS");
            }
        }
        return Library::options($options);
    }

    /**
     * Runs $callback($session) in a transaction and commits it, with the
     * library's retry loop (the whole transaction again on a
     * TransientTransactionError label, the commit on
     * UnknownTransactionCommitResult, for up to 120 s). A Throwable from
     * $callback aborts the transaction and is thrown again here. Returns
     * what the last call of $callback returned. Options as startTransaction,
     * and timeoutMS: the whole call's limit (every attempt and commit).
     */
    public function withTransaction(callable $callback, array $options = []): mixed
    {
        $bson = $this->transactionOptions($options);
        $ffi = Library::ffi();
        $outcome = ['value' => null, 'thrown' => null];
        // A Throwable cannot cross C: kept, and an mi_error returned instead.
        $body = function ($userData, $session) use ($callback, &$outcome, $ffi) {
            $outcome['thrown'] = null;
            try {
                $outcome['value'] = $callback($this);
                return null;
            } catch (\Throwable $thrown) {
                $outcome['thrown'] = $thrown;
                $raw = $thrown instanceof Exception ? $thrown->takeRaw() : null;
                return $raw ?? $ffi->mi_error_new(
                    $thrown instanceof Exception ? self::domainOf($thrown) : 11,
                    $thrown instanceof Exception ? $thrown->getCode() : 0,
                    'the transaction callback threw ' . get_class($thrown) . ': ' . $thrown->getMessage()
                );
            }
        };
        $this->lent = true;
        try {
            $error = $ffi->mi_session_with_transaction($this->live(), $body, null, $bson, $bson === null ? 0 : strlen($bson));
        } finally {
            $this->lent = false;
        }
        if ($error !== null && $outcome['thrown'] !== null) {
            $ffi->mi_error_free($error);
            throw $outcome['thrown'];
        }
        Library::check($error);
        return $outcome['value'];
    }

    private bool $lent = false;

    public function close(): void
    {
        if ($this->lent) {
            throw new LogicException('a session cannot be ended inside its withTransaction callback');
        }
        parent::close();
    }

    private static function domainOf(Exception $exception): int
    {
        foreach ([1 => InvalidArgumentException::class, 2 => NetworkException::class, 3 => CommandException::class,
            4 => WriteException::class, 5 => ServerSelectionException::class, 6 => TimeoutException::class,
            7 => ProtocolException::class, 8 => AuthenticationException::class, 9 => TlsException::class,
            10 => IncompatibleServerException::class] as $domain => $class) {
            if ($exception instanceof $class) {
                return $domain;
            }
        }
        return 11;
    }

    private function transactionOptions(array $options): ?string
    {
        foreach (array_keys($options) as $name) {
            // timeoutMS: withTransaction's; startTransaction sends nothing
            // to time, and the library refuses it there.
            if (!in_array($name, ['readConcern', 'writeConcern', 'maxCommitTimeMS', 'timeoutMS'], true)) {
                throw new InvalidArgumentException("unknown transaction option '$name'");
            }
        }
        return $options === [] ? null : Bson::encode($options);
    }
}
