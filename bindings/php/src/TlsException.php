<?php

declare(strict_types=1);

namespace MongoInline;

/** A TLS handshake or certificate check failed. */
class TlsException extends Exception
{
}
