<?php

declare(strict_types=1);

namespace MongoInline;

/** A write statement or the write concern failed; getCode() is the server's code. */
class WriteException extends Exception
{
}
