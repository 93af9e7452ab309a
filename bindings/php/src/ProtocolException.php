<?php

declare(strict_types=1);

namespace MongoInline;

/** The server's reply broke the wire protocol. */
class ProtocolException extends Exception
{
}
