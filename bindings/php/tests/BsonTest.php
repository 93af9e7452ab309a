<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Bson;
use MongoInline\Decimal128;
use MongoInline\ProtocolException;
use MongoInline\Regex;
use MongoInline\Timestamp;

/** The binding's own BSON codec, checked against the library's Extended JSON. */
final class BsonTest extends \PHPUnit\Framework\TestCase
{
    public function testEncodingMatchesTheLibrarysParser(): void
    {
        $ffi = \MongoInline\Library::ffi();
        $json = '{"i": 1, "l": {"$numberLong": "8589934592"}, "d": 1.5, "s": "é", "a": [1, "x"], "o": {"k": null}, "t": true}';
        $buffer = $ffi->new('mi_buffer');
        \MongoInline\Library::check($ffi->mi_bson_from_json($json, \FFI::addr($buffer)));
        $expected = \FFI::string($buffer->data, $buffer->len);
        $ffi->mi_buffer_free(\FFI::addr($buffer));
        $value = ['i' => 1, 'l' => 8589934592, 'd' => 1.5, 's' => 'é', 'a' => [1, 'x'], 'o' => ['k' => null], 't' => true];
        $this->assertSame(bin2hex($expected), bin2hex(Bson::encode($value)));
        $this->assertSame($value, Bson::decode($expected));
    }

    public function testOtherTypesRoundTrip(): void
    {
        $value = ['r' => new Regex('^a', 'i'), 'ts' => new Timestamp(3, 1700000000), 'dec' => new Decimal128(str_repeat("\x01", 16))];
        $this->assertEquals($value, Bson::decode(Bson::encode($value)));
    }

    public function testTruncatedBsonIsAnException(): void
    {
        $bson = Bson::encode(['s' => 'hello']);
        $this->expectException(ProtocolException::class);
        Bson::decode(substr($bson, 0, -3) . "\0");
    }
}
