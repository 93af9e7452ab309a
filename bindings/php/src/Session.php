<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/** An explicit session: causal consistency and transactions. */
final class Session extends Handle
{
    /** @param array{causalConsistency?: bool, snapshot?: bool} $options */
    public function __construct(public readonly Client $client, array $options = [])
    {
        parent::__construct();
        foreach (array_keys($options) as $name) {
            if (!in_array($name, ['causalConsistency', 'snapshot'], true)) {
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
        foreach (array_keys($options) as $name) {
            if (!in_array($name, ['readConcern', 'writeConcern', 'maxCommitTimeMS'], true)) {
                throw new InvalidArgumentException("unknown transaction option '$name'");
            }
        }
        $bson = $options === [] ? null : Bson::encode($options);
        Library::check(Library::ffi()->mi_session_start_transaction($this->live(), $bson, $bson === null ? 0 : strlen($bson)));
    }

    /** Commits the transaction (LogicException if none was started). */
    public function commitTransaction(): void
    {
        Library::check(Library::ffi()->mi_session_commit_transaction($this->live()));
    }

    /** Aborts the transaction (LogicException if none was started). */
    public function abortTransaction(): void
    {
        Library::check(Library::ffi()->mi_session_abort_transaction($this->live()));
    }

    /**
     * Runs $callback($session) in a transaction with the driver's retry
     * loop; an exception from $callback aborts and propagates. Needs the
     * library's mi_session_with_transaction.
     */
    public function withTransaction(callable $callback, array $options = []): mixed
    {
        throw new LogicException(
            'withTransaction needs mi_session_with_transaction, which this build of libmongo_inline does not export'
        );
    }
}
