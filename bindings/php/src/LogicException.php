<?php

declare(strict_types=1);

namespace MongoInline;

/** The call does not fit the state: a closed handle, a commit without a transaction, a parent's cursor used in a forked child. */
class LogicException extends Exception
{
}
