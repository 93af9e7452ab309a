<?php

declare(strict_types=1);

namespace MongoInline;

/** The server answered ok: 0; getCode() is its error code. */
class CommandException extends Exception
{
}
