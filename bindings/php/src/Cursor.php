<?php

declare(strict_types=1);

namespace MongoInline;

use FFI\CData;

/**
 * Query results as an Iterator, fetched a batch at a time. It iterates
 * once: rewind() after the first document is a LogicException.
 */
final class Cursor extends Handle implements \Iterator
{
    private ?array $current = null;
    private int $position = -1;
    private bool $exhausted = false;

    /** @internal made by Collection */
    public function __construct(CData $ptr)
    {
        parent::__construct();
        $this->ptr = $ptr;
    }

    protected function kind(): string
    {
        return 'cursor';
    }

    protected function free(CData $ptr): void
    {
        Library::ffi()->mi_cursor_free($ptr);
    }

    public function rewind(): void
    {
        if ($this->position > 0) {
            throw new LogicException('a cursor iterates once; run the query again to start over');
        }
        if ($this->position < 0) {
            $this->next();
        }
    }

    public function valid(): bool
    {
        return $this->current !== null;
    }

    public function current(): mixed
    {
        return $this->current;
    }

    public function key(): mixed
    {
        return $this->current === null ? null : $this->position;
    }

    public function next(): void
    {
        if ($this->exhausted) {
            $this->current = null;
            return;
        }
        $ffi = Library::ffi();
        $document = $ffi->new('const char *');
        $length = $ffi->new('size_t');
        Library::check($ffi->mi_cursor_next($this->live(), \FFI::addr($document), \FFI::addr($length)));
        $this->position++;
        if (\FFI::isNull($document)) {
            $this->current = null;
            $this->exhausted = true;
            $this->close();
            return;
        }
        $this->current = Bson::decode(\FFI::string($document, $length->cdata));
    }

    /** Every remaining document. */
    public function toArray(): array
    {
        return iterator_to_array($this, false);
    }
}
