<?php
// Documents in and out of the C ABI two ways, to choose the package's codec:
// its own BSON codec in PHP (MongoInline\Bson), or PHP's json_encode/decode
// with the library's Extended JSON helpers (mi_bson_from_json,
// mi_bson_to_json) and a walk that turns {"$oid": ...} and the like into
// the package's classes. Prints microseconds per encode and per decode of a
// small and of a larger document. Usage: php bench/codec.php [ROUNDS]
declare(strict_types=1);

require dirname(__DIR__) . '/autoload.php';

use MongoInline\Binary;
use MongoInline\Bson;
use MongoInline\Library;
use MongoInline\ObjectId;
use MongoInline\UTCDateTime;

function json_encode_bson(array $document): string
{
    $ffi = Library::ffi();
    $buffer = $ffi->new('mi_buffer');
    Library::check($ffi->mi_bson_from_json(json_encode($document, JSON_THROW_ON_ERROR | JSON_PRESERVE_ZERO_FRACTION), FFI::addr($buffer)));
    $bson = FFI::string($buffer->data, $buffer->len);
    $ffi->mi_buffer_free(FFI::addr($buffer));
    return $bson;
}

function json_decode_bson(string $bson): array
{
    $ffi = Library::ffi();
    $out = $ffi->new('char *');
    Library::check($ffi->mi_bson_to_json($bson, strlen($bson), FFI::addr($out)));
    $json = FFI::string($out);
    $ffi->mi_string_free($out);
    return from_extended(json_decode($json, true, 512, JSON_THROW_ON_ERROR));
}

function from_extended(array $value): mixed
{
    if (count($value) === 1) {
        $key = array_key_first($value);
        if (is_string($key) && $key[0] === '$') {
            $inner = $value[$key];
            switch ($key) {
                case '$oid':
                    return new ObjectId($inner);
                case '$date':
                    return new UTCDateTime(is_array($inner) ? (int) $inner['$numberLong'] : (int) (new DateTimeImmutable($inner))->format('Uv'));
                case '$binary':
                    return new Binary(base64_decode($inner['base64']), hexdec($inner['subType']));
                case '$numberLong':
                    return (int) $inner;
            }
        }
    }
    foreach ($value as $k => $v) {
        if (is_array($v)) {
            $value[$k] = from_extended($v);
        }
    }
    return $value;
}

$rounds = (int) ($argv[1] ?? 20000);
$small = ['_id' => new ObjectId(), 'name' => 'Ada Lovelace', 'n' => 42, 'score' => 9.5, 'active' => true];
$large = $small + [
    'born' => new UTCDateTime(-4861682999750),
    'tags' => ['math', 'engines', 'poetry', 'notes'],
    'address' => ['street' => '12 St James Square', 'city' => 'London', 'zip' => 'SW1Y'],
    'history' => array_map(static fn ($i) => ['at' => $i, 'what' => "event $i", 'ok' => $i % 2 === 0], range(1, 20)),
    'blob' => new Binary(random_bytes(64)),
];
printf("%-8s %-24s %12s %12s\n", 'doc', 'codec', 'encode us', 'decode us');
foreach (['small' => $small, 'large' => $large] as $name => $document) {
    $bson = Bson::encode($document);
    if (json_decode_bson(json_encode_bson($document)) != Bson::decode($bson)) {
        fwrite(STDERR, "the two codecs disagree on the $name document\n");
        exit(1);
    }
    foreach (['own BSON (PHP)' => ['MongoInline\Bson::encode', 'MongoInline\Bson::decode'], 'Extended JSON helpers' => ['json_encode_bson', 'json_decode_bson']] as $codec => [$encode, $decode]) {
        $start = hrtime(true);
        for ($i = 0; $i < $rounds; $i++) {
            $encode($document);
        }
        $encodeUs = (hrtime(true) - $start) / 1e3 / $rounds;
        $start = hrtime(true);
        for ($i = 0; $i < $rounds; $i++) {
            $decode($bson);
        }
        $decodeUs = (hrtime(true) - $start) / 1e3 / $rounds;
        printf("%-8s %-24s %12.2f %12.2f\n", $name . ' (' . strlen($bson) . ' B)', $codec, $encodeUs, $decodeUs);
    }
}
