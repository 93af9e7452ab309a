<?php

declare(strict_types=1);

namespace MongoInline;

/** The server's wire versions do not overlap the driver's. */
class IncompatibleServerException extends Exception
{
}
