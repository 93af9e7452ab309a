<?php

declare(strict_types=1);

namespace MongoInline;

/** An invalid argument: bad URI, unknown option, invalid name, unusable TLS file. */
class InvalidArgumentException extends Exception
{
}
