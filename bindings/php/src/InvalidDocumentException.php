<?php

declare(strict_types=1);

namespace MongoInline;

/** A document, or a value in it, that BSON cannot hold. */
class InvalidDocumentException extends InvalidArgumentException
{
}
