<?php

declare(strict_types=1);

namespace MongoInline;

/** The operation's timeoutMS passed. */
class TimeoutException extends Exception
{
}
