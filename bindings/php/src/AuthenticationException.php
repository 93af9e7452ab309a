<?php

declare(strict_types=1);

namespace MongoInline;

/** Authentication failed. */
class AuthenticationException extends Exception
{
}
