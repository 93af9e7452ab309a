<?php

declare(strict_types=1);

namespace MongoInline;

/** No suitable server within serverSelectionTimeoutMS. */
class ServerSelectionException extends Exception
{
}
