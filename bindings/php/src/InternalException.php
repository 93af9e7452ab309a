<?php

declare(strict_types=1);

namespace MongoInline;

/** A bug in the library (a panic it caught). */
class InternalException extends Exception
{
}
