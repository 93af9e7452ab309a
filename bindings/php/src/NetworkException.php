<?php

declare(strict_types=1);

namespace MongoInline;

/** A socket failed or could not be opened, or a mongodb+srv look-up failed. */
class NetworkException extends Exception
{
}
