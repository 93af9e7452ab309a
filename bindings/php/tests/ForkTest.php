<?php

declare(strict_types=1);

namespace MongoInline\Tests;

use MongoInline\Client;
use MongoInline\LogicException;

/**
 * pcntl_fork: the child keeps using the client it inherited; the parent's
 * sessions and cursors are refused in the child and keep working in the
 * parent.
 */
final class ForkTest extends TestCase
{
    public function testChildUsesTheInheritedClientAndDropsParentState(): void
    {
        $this->coll->insertMany(array_map(static fn ($i) => ['_id' => $i], range(0, 5)));
        $session = $this->client->startSession();
        $cursor = $this->coll->find([], ['sort' => ['_id' => 1], 'batchSize' => 2, 'session' => $session]);
        $cursor->rewind();
        $this->assertSame(0, $cursor->current()['_id']);
        $parentLsid = $session->getSessionId();

        $report = tempnam(sys_get_temp_dir(), 'fork');
        $pid = pcntl_fork();
        $this->assertNotSame(-1, $pid);
        if ($pid === 0) {
            $this->child($cursor, $session, $report);
        }
        pcntl_waitpid($pid, $status);
        $result = json_decode((string) file_get_contents($report), true);
        unlink($report);
        $this->assertSame(0, pcntl_wexitstatus($status), json_encode($result));
        $this->assertStringContainsString('before pcntl_fork', $result['cursor']);
        $this->assertStringContainsString('before pcntl_fork', $result['session']);
        $this->assertNotSame(bin2hex($parentLsid['id']->data), $result['lsid']);

        // The parent's cursor and session carry on where they were.
        $cursor->next();
        $rest = [];
        for (; $cursor->valid(); $cursor->next()) {
            $rest[] = $cursor->current()['_id'];
        }
        $this->assertSame([1, 2, 3, 4, 5], $rest);
        $session->endSession();
        $froms = array_column($this->coll->find(['from' => ['$exists' => true]], ['sort' => ['from' => 1]])->toArray(), 'from');
        $this->assertSame(['child', 'child-session'], $froms);
    }

    /** Runs in the child: reports to $report and leaves without PHPUnit's shutdown. */
    private function child(\MongoInline\Cursor $cursor, \MongoInline\Session $session, string $report): never
    {
        $result = [];
        $status = 0;
        try {
            $this->coll->insertOne(['from' => 'child']);
            $own = $this->client->startSession();
            $this->coll->insertOne(['from' => 'child-session'], ['session' => $own]);
            $result['lsid'] = bin2hex($own->getSessionId()['id']->data);
            $own->endSession();
            try {
                $cursor->next();
                $result['cursor'] = 'usable';
            } catch (LogicException $e) {
                $result['cursor'] = $e->getMessage();
            }
            try {
                $this->coll->insertOne(['from' => 'parent-session'], ['session' => $session]);
                $result['session'] = 'usable';
            } catch (LogicException $e) {
                $result['session'] = $e->getMessage();
            }
            $cursor->close(); // dropped, not freed: the parent's server cursor lives on
            $session->close();
            $this->client->close();
        } catch (\Throwable $e) {
            $result['error'] = (string) $e;
            $status = 1;
        }
        file_put_contents($report, json_encode($result));
        // _exit: no shutdown functions, no destructors of the parent's objects.
        \FFI::cdef('void _exit(int status);')->_exit($status);
    }
}
