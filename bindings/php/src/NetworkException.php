<?php

declare(strict_types=1);

namespace MongoInline;

/** A socket failed or could not be opened. */
class NetworkException extends Exception
{
}
