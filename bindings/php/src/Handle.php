<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/**
 * An owned C handle, freed once (close() twice does nothing), and never in
 * a process that inherited it through pcntl_fork() unless the library
 * allows it (a client: it starts afresh in the child).
 */
abstract class Handle
{
    protected ?CData $ptr = null;
    private int $pid;

    protected function __construct()
    {
        $this->pid = getmypid();
    }

    abstract protected function kind(): string;

    abstract protected function free(CData $ptr): void;

    /** Whether a forked child may use (and free) the handle it inherited. */
    protected function survivesFork(): bool
    {
        return false;
    }

    /** The live pointer, or a LogicException saying why there is none. */
    protected function live(): CData
    {
        if ($this->ptr === null) {
            throw new LogicException("the {$this->kind()} is closed");
        }
        if ($this->pid !== getmypid() && !$this->survivesFork()) {
            throw new LogicException(
                "the {$this->kind()} was opened in the parent process before pcntl_fork(); open a new one in this process"
            );
        }
        return $this->ptr;
    }

    /** Frees the handle; a second call does nothing. */
    public function close(): void
    {
        $ptr = $this->ptr;
        $this->ptr = null;
        if ($ptr !== null && !\FFI::isNull($ptr) && ($this->pid === getmypid() || $this->survivesFork())) {
            $this->free($ptr);
        }
    }

    public function __destruct()
    {
        $this->close();
    }
}
