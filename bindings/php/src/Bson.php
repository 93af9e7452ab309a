<?php

declare(strict_types=1);

namespace MongoInline;

/**
 * PHP values <-> BSON, in PHP (no extension needed).
 *
 * Encoding: a PHP list (array_is_list) is a BSON array, any other array or
 * a stdClass a document; a top-level value is always a document (so `[]` is
 * the empty filter). int is int32 when it fits, else int64; float double;
 * string UTF-8 (other bytes: use Binary); ObjectId, UTCDateTime, Binary,
 * Timestamp, Regex, Decimal128 their BSON types. Anything else (a resource,
 * a closure, another object, invalid UTF-8, nesting deeper than 100) is an
 * InvalidDocumentException naming the field.
 *
 * Decoding gives arrays for documents and lists for arrays, and the classes
 * above for their types.
 */
final class Bson
{
    private const MAX_DEPTH = 100;

    /** A document (array or stdClass) as BSON bytes. */
    public static function encode(array|object $document): string
    {
        if (!is_array($document) && !$document instanceof \stdClass) {
            throw new InvalidDocumentException(
                'a document must be an array or stdClass, not ' . get_debug_type($document)
            );
        }
        return self::document((array) $document, '', 0);
    }

    private static function document(array $fields, string $path, int $depth): string
    {
        if ($depth > self::MAX_DEPTH) {
            throw new InvalidDocumentException("document nested deeper than " . self::MAX_DEPTH . " at '$path'");
        }
        $body = '';
        foreach ($fields as $key => $value) {
            $key = (string) $key;
            if (str_contains($key, "\0")) {
                throw new InvalidDocumentException("field name at '$path' contains a NUL byte");
            }
            $body .= self::element($key, $value, $path === '' ? $key : "$path.$key", $depth);
        }
        return pack('V', strlen($body) + 5) . $body . "\0";
    }

    private static function element(string $key, mixed $value, string $path, int $depth): string
    {
        $name = $key . "\0";
        switch (true) {
            case $value === null:
                return "\x0A" . $name;
            case is_bool($value):
                return "\x08" . $name . ($value ? "\x01" : "\x00");
            case is_int($value):
                return $value >= -2147483648 && $value <= 2147483647
                    ? "\x10" . $name . pack('V', $value)
                    : "\x12" . $name . pack('P', $value);
            case is_float($value):
                return "\x01" . $name . pack('e', $value);
            case is_string($value):
                if (!preg_match('//u', $value)) {
                    throw new InvalidDocumentException(
                        "'$path' is not valid UTF-8 (a BSON string must be); wrap bytes in MongoInline\\Binary"
                    );
                }
                return "\x02" . $name . pack('V', strlen($value) + 1) . $value . "\0";
            case is_array($value):
                return array_is_list($value) && $value !== []
                    ? "\x04" . $name . self::document($value, $path, $depth + 1)
                    : ($value === [] ? "\x04" . $name . "\x05\0\0\0\0"
                        : "\x03" . $name . self::document($value, $path, $depth + 1));
            case $value instanceof \stdClass:
                return "\x03" . $name . self::document((array) $value, $path, $depth + 1);
            case $value instanceof ObjectId:
                return "\x07" . $name . $value->bytes;
            case $value instanceof UTCDateTime:
                return "\x09" . $name . pack('P', $value->milliseconds);
            case $value instanceof Binary:
                return "\x05" . $name . pack('V', strlen($value->data)) . chr($value->subtype) . $value->data;
            case $value instanceof Timestamp:
                return "\x11" . $name . pack('VV', $value->increment, $value->timestamp);
            case $value instanceof Regex:
                return "\x0B" . $name . self::cstring($value->pattern, $path) . self::cstring($value->flags, $path);
            case $value instanceof Decimal128:
                return "\x13" . $name . $value->bytes;
        }
        throw new InvalidDocumentException("'$path' holds a " . get_debug_type($value) . ', which BSON cannot hold');
    }

    private static function cstring(string $value, string $path): string
    {
        if (str_contains($value, "\0")) {
            throw new InvalidDocumentException("'$path' contains a NUL byte");
        }
        return $value . "\0";
    }

    /** BSON bytes as a PHP array (documents: arrays; arrays: lists). */
    public static function decode(string $bson): array
    {
        $offset = 0;
        return self::readDocument($bson, $offset, false);
    }

    private static function readDocument(string $bson, int &$offset, bool $list): array
    {
        $length = self::readInt32($bson, $offset);
        $end = $offset - 4 + $length;
        if ($length < 5 || $end > strlen($bson) || $bson[$end - 1] !== "\0") {
            throw new ProtocolException('malformed BSON document');
        }
        $result = [];
        while ($offset < $end - 1) {
            $type = ord($bson[$offset++]);
            $nul = strpos($bson, "\0", $offset);
            if ($nul === false || $nul >= $end) {
                throw new ProtocolException('malformed BSON field name');
            }
            $key = substr($bson, $offset, $nul - $offset);
            $offset = $nul + 1;
            $value = self::readValue($type, $bson, $offset);
            if ($list) {
                $result[] = $value;
            } else {
                $result[$key] = $value;
            }
        }
        $offset = $end;
        return $result;
    }

    private static function readValue(int $type, string $bson, int &$offset): mixed
    {
        switch ($type) {
            case 0x01:
                return self::unpack('e', $bson, $offset, 8);
            case 0x02:
                $length = self::unpack('l', $bson, $offset, 4);
                return substr(self::take($bson, $offset, $length), 0, -1);
            case 0x03:
                return self::readDocument($bson, $offset, false);
            case 0x04:
                return self::readDocument($bson, $offset, true);
            case 0x05:
                $length = self::unpack('l', $bson, $offset, 4);
                $subtype = ord(self::take($bson, $offset, 1));
                return new Binary(self::take($bson, $offset, $length), $subtype);
            case 0x07:
                return new ObjectId(bin2hex(self::take($bson, $offset, 12)));
            case 0x08:
                return self::take($bson, $offset, 1) !== "\0";
            case 0x09:
                return new UTCDateTime(self::unpack('q', $bson, $offset, 8));
            case 0x0A:
                return null;
            case 0x0B:
                return new Regex(self::readCString($bson, $offset), self::readCString($bson, $offset));
            case 0x10:
                return self::unpack('l', $bson, $offset, 4);
            case 0x11:
                $increment = self::unpack('V', $bson, $offset, 4);
                return new Timestamp($increment, self::unpack('V', $bson, $offset, 4));
            case 0x12:
                return self::unpack('q', $bson, $offset, 8);
            case 0x13:
                return new Decimal128(self::take($bson, $offset, 16));
        }
        throw new InvalidDocumentException(sprintf('BSON type 0x%02X is not supported by this binding', $type));
    }

    /** One fixed-size number at $offset (unpack reads in place: no substring). */
    private static function unpack(string $format, string $bson, int &$offset, int $size): int|float
    {
        if ($offset + $size > strlen($bson)) {
            throw new ProtocolException('BSON value runs past its document');
        }
        $value = unpack($format, $bson, $offset)[1];
        $offset += $size;
        return $value;
    }

    private static function readInt32(string $bson, int &$offset): int
    {
        return self::unpack('l', $bson, $offset, 4);
    }

    private static function readCString(string $bson, int &$offset): string
    {
        $nul = strpos($bson, "\0", $offset);
        if ($nul === false) {
            throw new ProtocolException('malformed BSON string');
        }
        $value = substr($bson, $offset, $nul - $offset);
        $offset = $nul + 1;
        return $value;
    }

    private static function take(string $bson, int &$offset, int $length): string
    {
        if ($length < 0 || $offset + $length > strlen($bson)) {
            throw new ProtocolException('BSON value runs past its document');
        }
        $bytes = substr($bson, $offset, $length);
        $offset += $length;
        return $bytes;
    }
}
