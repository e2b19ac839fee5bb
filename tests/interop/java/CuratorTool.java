// CuratorTool — Apache Curator's lock recipes driven from a test or a benchmark, so that dlock's
// ZooKeeper backend can be checked against the real thing on the same znode paths.
//
// Build: javac -cp /usr/share/java/curator-recipes.jar -d CLASSES CuratorTool.java
// Run:   java -cp CLASSES:/usr/share/java/curator-recipes.jar[:/usr/share/java/slf4j-simple.jar]
//             CuratorTool [options] MODE ...
// (tests/interop/CMakeLists.txt does both and hands the command line to C++ tests.)
//
// CONNECT is a ZooKeeper connect string (host:port[,host:port...][/chroot]) or a dlock URL
// zk://host:port[,...][/chroot][?query] (the query is ignored).
//
// Modes:
//   CONNECT mutex PATH     an InterProcessMutex on PATH, driven by lines on stdin:
//   CONNECT rwlock PATH    an InterProcessReadWriteLock on PATH, likewise.
//     Prints "ready" once the session is connected, then answers each command with one line:
//       lock | read-lock | write-lock       blocks until acquired → "acquired NODE CZXID"
//       try-lock MS | try-read-lock MS | try-write-lock MS
//                                           → "acquired NODE CZXID" or "timeout"
//       unlock                              releases the most recent acquisition → "released"
//       quit                                → exits 0 (held locks are released first)
//     NODE is the name of the lock's znode under PATH (e.g. _c_<uuid>-lock-0000000003, or
//     _c_<uuid>-__READ__0000000004), CZXID the zxid that created it (decimal). Acquiring again
//     what this process already holds is reentrant (Curator's rule) and prints the same node.
//     mutex takes lock/try-lock; rwlock the read-/write- forms.
//   CONNECT latch PATH ID  a LeaderLatch on PATH with participant id ID, driven by lines on stdin:
//     Prints "ready" once the session is connected, then answers each command with one line:
//       start                               joins the election → "started"
//       await MS                            waits up to MS for leadership → "leader" or "timeout"
//       leader                              who leads, as Curator reads it → "leader-id ID" or
//                                           "no-leader"
//       close                               leaves the election (resigns if leading) → "closed"
//       quit                                → exits 0 (closing the latch first if started)
//   CONNECT semaphore PATH PERMITS  an InterProcessSemaphoreV2 with PERMITS leases on PATH
//     (PERMITS 1 is what InterProcessSemaphoreMutex uses), driven by lines on stdin:
//     Prints "ready" once the session is connected, then answers each command with one line:
//       acquire                             blocks until a lease is ours → "acquired NODE CZXID"
//       try-acquire MS                      → "acquired NODE CZXID" or "timeout"
//       release                             returns the most recent lease → "released"
//       quit                                → exits 0 (leases still held are returned first)
//     NODE is the lease's znode under PATH/leases (_c_<uuid>-lease-0000000003).
//   CONNECT barrier PATH MEMBERS
//     One member of a DistributedDoubleBarrier on PATH for MEMBERS members, driven by lines on
//     stdin. Prints "ready" once the session is connected, then answers each command:
//       enter | enter MS                    enters; blocks until MEMBERS are in (at most MS)
//                                           → "entered" or "timeout"
//       leave | leave MS                    leaves; blocks until every member has left (at
//                                           most MS) → "left" or "timeout"
//       quit                                → exits 0
//   contend CONNECT PATH ITERATIONS COUNTER_FILE [INTERVAL_LOG]
//     ITERATIONS critical sections with an InterProcessMutex on PATH; in each, a non-atomic
//     read of the integer in COUNTER_FILE → sleep --work-us → write of the integer + 1, so
//     lost updates appear if exclusion fails. After each one it appends a line
//     "<tag> <start-ns> <end-ns>" to INTERVAL_LOG (default COUNTER_FILE.log): the critical
//     section's bounds on CLOCK_MONOTONIC (System.nanoTime() on Linux; the same clock as
//     std::chrono::steady_clock), so a test can check no two holders' intervals overlap.
//     Prints "ready" when connected (then waits for a "go" line if --wait-go), "done N" at
//     the end.
//     COUNTER_FILE holds a decimal integer and a newline (empty or missing = 0); every writer
//     rewrites it whole (truncate, write).
//   CONNECT count PATH [DELTA]
//     A SharedCount on PATH (seed 0): adds DELTA if given (trySetCount until it wins), then
//     prints "count V" (the value it read, or set) and exits 0.
//   CONNECT atomic-long PATH [DELTA]
//     A DistributedAtomicLong on PATH: adds DELTA if given, then prints "long V" (the value
//     after) and exits 0; exits 75 if the add did not succeed within its retries.
//   bench CONNECT PATH SECONDS uncontended|contended
//     Curator's InterProcessMutex as a peer for `dlock bench`: P worker JVMs (--processes,
//     contended default 4, uncontended 1), each its own session, lock + unlock on PATH for
//     SECONDS (or --max-ops per process); contended does a non-atomic read → write of a
//     counter in shared memory inside the lock, as dlock bench does. Prints ONE JSON line with
//     the field names of bench/peers/redis_py_peer.py ("peer": "curator").
//
// Options (anywhere on the line):
//   --session-timeout-ms N   ZooKeeper session timeout asked for (default 5000)
//   --connect-timeout-ms N   how long to wait for the first connection (default 10000)
//   --retries N              ExponentialBackoffRetry(100 ms, N, max 1 s) (default 10)
//   --work-us N              contend: sleep inside the critical section (default 1000)
//   --tag T                  contend: the interval lines' tag (default J)
//   --wait-go                contend: wait for a "go" line on stdin after "ready"
//   --processes P            bench: worker processes
//   --max-ops N              bench: lock+unlock per process at most (default 1000000)
//   --warmup-ops N           bench: lock+unlock per process before the clock starts, at most 1 s
//                            (default 200; the JIT compiler needs them, the other peers do not)
//
// Lifetime: when stdin is a pipe and it closes (the test that started it died), the tool
// exits at once, even while waiting for a lock; its session is closed on the way out, so
// its znodes go at once. contend and bench also stop by themselves after --time-limit-s
// (default 300) and exit 70.
//
// Exit status: 0; 1 if bench saw lost updates; 64 on bad usage; 70 on any error, which is
// printed on stderr ("CuratorTool: ...").

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.data.Stat;

public final class CuratorTool {
  private static final PrintStream out = System.out;

  /** Usage errors exit 64, everything else 70. */
  private static final class UsageError extends Exception {
    private static final long serialVersionUID = 1L;

    UsageError(String message) { super(message); }
  }

  // ------------------------------------------------------------------ options

  private static final class Options {
    final Map<String, String> named = new HashMap<>();
    final List<String> positional = new ArrayList<>();
    boolean waitGo = false;

    static Options parse(String[] args) throws UsageError {
      Options o = new Options();
      for (int i = 0; i < args.length; ++i) {
        String a = args[i];
        if (a.equals("--wait-go")) {
          o.waitGo = true;
        } else if (a.startsWith("--")) {
          if (i + 1 >= args.length) throw new UsageError(a + " needs a value");
          o.named.put(a.substring(2), args[++i]);
        } else {
          o.positional.add(a);
        }
      }
      for (String k : o.named.keySet()) {
        if (!Arrays.asList("session-timeout-ms", "connect-timeout-ms", "retries", "work-us", "tag",
                           "processes", "max-ops", "warmup-ops", "time-limit-s", "worker").contains(k)) {
          throw new UsageError("unknown option --" + k);
        }
      }
      return o;
    }

    long number(String name, long dflt, long min, long max) throws UsageError {
      String v = named.get(name);
      if (v == null) return dflt;
      try {
        long n = Long.parseLong(v);
        if (n < min || n > max) throw new UsageError("--" + name + " must be in [" + min + ", " + max + "]");
        return n;
      } catch (NumberFormatException e) {
        throw new UsageError("--" + name + ": not a number: " + v);
      }
    }

    /** Positional argument i as a number in [min, max]. */
    double argNumber(int i, String what, double min, double max) throws UsageError {
      String v = arg(i, what);
      double n;
      try {
        n = Double.parseDouble(v);
      } catch (NumberFormatException e) {
        throw new UsageError(what + ": not a number: " + v);
      }
      if (!(n >= min && n <= max)) throw new UsageError(what + " must be in [" + min + ", " + max + "]");
      return n;
    }

    String arg(int i, String what) throws UsageError {
      if (i >= positional.size()) throw new UsageError("missing " + what);
      return positional.get(i);
    }
  }

  /** zk://h:p,h:p/chroot?q → h:p,h:p/chroot; a plain connect string as it is. */
  static String connectString(String s) {
    if (s.startsWith("zk://")) s = s.substring(5);
    int q = s.indexOf('?');
    return q < 0 ? s : s.substring(0, q);
  }

  static CuratorFramework connect(String where, Options o) throws Exception {
    int session = (int) o.number("session-timeout-ms", 5000, 1, 600_000);
    int connectMs = (int) o.number("connect-timeout-ms", 10_000, 1, 600_000);
    int retries = (int) o.number("retries", 10, 0, 29);
    CuratorFramework client = CuratorFrameworkFactory.builder()
        .connectString(connectString(where))
        .sessionTimeoutMs(session)
        .connectionTimeoutMs(connectMs)
        .retryPolicy(new ExponentialBackoffRetry(100, retries, 1000))
        .build();
    client.start();
    if (!client.blockUntilConnected(connectMs, TimeUnit.MILLISECONDS)) {
      client.close();
      throw new IOException("no connection to " + where + " within " + connectMs + " ms");
    }
    // Closing the session on the way out deletes our ephemeral nodes at once.
    Runtime.getRuntime().addShutdownHook(new Thread(client::close));
    return client;
  }

  // ------------------------------------------------------------------ stdin

  /** Whether fd 0 is a pipe or a socket (a controller that can go away), not a file or a tty. */
  static boolean stdinIsPipe() {
    try {
      String target = Files.readSymbolicLink(Paths.get("/proc/self/fd/0")).toString();
      return target.startsWith("pipe:") || target.startsWith("socket:");
    } catch (IOException | UnsupportedOperationException e) {
      return false;
    }
  }

  /**
   * Reads stdin lines into a queue on a daemon thread. At end of input: if exitWhenBusy and the
   * main thread is blocked in a command, the process exits at once; otherwise a null marks the
   * end so the commands already read still run.
   */
  private static final class StdinLines {
    private final BlockingQueue<Object> lines = new LinkedBlockingQueue<>();
    private static final Object END = new Object();
    private boolean ended = false;
    private boolean busy = false;

    StdinLines() {
      Thread t = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
          String line;
          while ((line = r.readLine()) != null) lines.add(line.trim());
        } catch (IOException e) {
          // Same as end of input.
        }
        synchronized (this) {
          ended = true;
          if (busy) exitBecauseStdinClosed();
        }
        lines.add(END);
      }, "stdin");
      t.setDaemon(true);
      t.start();
    }

    /** The next line, or null at end of input. */
    String next() throws InterruptedException {
      Object o = lines.take();
      if (o == END) {
        lines.add(END);
        return null;
      }
      return (String) o;
    }

    /** Around a command that may block for long: the process exits if stdin closes meanwhile. */
    synchronized void beginBlocking() {
      if (ended) exitBecauseStdinClosed();
      busy = true;
    }

    synchronized void endBlocking() { busy = false; }

    static void exitBecauseStdinClosed() {
      System.err.println("CuratorTool: stdin closed while waiting: exiting");
      System.exit(0);
    }
  }

  /** Exits when stdin (a pipe) closes: for modes that do not read commands. */
  static void exitWhenStdinCloses(StdinLines lines) {
    Thread t = new Thread(() -> {
      try {
        while (lines.next() != null) {
          // Lines other than the one --wait-go waits for are ignored.
        }
      } catch (InterruptedException e) {
        return;
      }
      StdinLines.exitBecauseStdinClosed();
    }, "stdin-watch");
    t.setDaemon(true);
    t.start();
  }

  /** Stops the process after the time limit, whatever it is doing. */
  static void timeLimit(Options o) throws UsageError {
    long seconds = o.number("time-limit-s", 300, 1, 86_400);
    Thread t = new Thread(() -> {
      try {
        Thread.sleep(seconds * 1000);
      } catch (InterruptedException e) {
        return;
      }
      System.err.println("CuratorTool: time limit of " + seconds + " s reached: exiting");
      Runtime.getRuntime().halt(70);
    }, "time-limit");
    t.setDaemon(true);
    t.start();
  }

  // ------------------------------------------------------------------ interactive modes

  /** The znode a Curator lock holds for this thread (getLockPath is protected: reflection). */
  static String lockPath(InterProcessMutex m) throws Exception {
    Method get = InterProcessMutex.class.getDeclaredMethod("getLockPath");
    get.setAccessible(true);
    return (String) get.invoke(m);
  }

  static String acquiredLine(CuratorFramework client, InterProcessMutex m) throws Exception {
    String path = lockPath(m);
    Stat stat = client.checkExists().forPath(path);
    if (stat == null) throw new IllegalStateException("our lock node " + path + " is gone");
    return "acquired " + path.substring(path.lastIndexOf('/') + 1) + " " + stat.getCzxid();
  }

  static int count(Options o) throws Exception {
    String where = o.arg(0, "CONNECT");
    String path = o.arg(2, "PATH");
    if (o.positional.size() > 4) throw new UsageError("count takes CONNECT count PATH [DELTA]");
    int delta = o.positional.size() == 4 ? Integer.parseInt(o.arg(3, "DELTA")) : 0;
    CuratorFramework client = connect(where, o);
    try (SharedCount shared = new SharedCount(client, path, 0)) {
      shared.start();
      VersionedValue<Integer> seen = shared.getVersionedValue();
      while (delta != 0 && !shared.trySetCount(seen, seen.getValue() + delta)) seen = shared.getVersionedValue();
      out.println("count " + (seen.getValue() + delta));
    }
    return 0;
  }

  static int atomicLong(Options o) throws Exception {
    String where = o.arg(0, "CONNECT");
    String path = o.arg(2, "PATH");
    if (o.positional.size() > 4) throw new UsageError("atomic-long takes CONNECT atomic-long PATH [DELTA]");
    long delta = o.positional.size() == 4 ? Long.parseLong(o.arg(3, "DELTA")) : 0;
    CuratorFramework client = connect(where, o);
    DistributedAtomicLong value = new DistributedAtomicLong(client, path, new RetryNTimes(20, 10));
    AtomicValue<Long> result = delta != 0 ? value.add(delta) : value.get();
    if (!result.succeeded()) return 75;
    out.println("long " + result.postValue());
    client.close();
    return 0;
  }

  /** The next command's words; null at the end of stdin or on "quit". Blank lines are skipped. */
  static String[] nextCommand(StdinLines lines) throws InterruptedException {
    String line;
    while ((line = lines.next()) != null) {
      if (line.isEmpty()) continue;
      String[] w = line.split("\\s+");
      return w[0].equals("quit") ? null : w;
    }
    return null;
  }

  static int interactive(String mode, Options o) throws Exception {
    String where = o.arg(0, "CONNECT");
    String path = o.arg(2, "PATH");
    if (o.positional.size() != 3) throw new UsageError(mode + " takes CONNECT " + mode + " PATH");
    StdinLines lines = new StdinLines();
    CuratorFramework client = connect(where, o);
    InterProcessMutex mutex = null;
    InterProcessReadWriteLock rw = null;
    if (mode.equals("mutex")) {
      mutex = new InterProcessMutex(client, path);
    } else {
      rw = new InterProcessReadWriteLock(client, path);
    }
    Deque<InterProcessMutex> held = new ArrayDeque<>();
    out.println("ready");
    out.flush();
    String[] w;
    while ((w = nextCommand(lines)) != null) {
      String line = String.join(" ", w);
      String verb = w[0];
      if (verb.equals("unlock")) {
        if (held.isEmpty()) throw new IllegalStateException("unlock: nothing held");
        held.pop().release();
        out.println("released");
        out.flush();
        continue;
      }
      boolean tryForm = verb.startsWith("try-");
      String kind = tryForm ? verb.substring(4) : verb;
      InterProcessMutex lock;
      if (mutex != null && kind.equals("lock")) {
        lock = mutex;
      } else if (rw != null && kind.equals("read-lock")) {
        lock = rw.readLock();
      } else if (rw != null && kind.equals("write-lock")) {
        lock = rw.writeLock();
      } else {
        throw new UsageError("unknown command for " + mode + ": " + line);
      }
      boolean got;
      if (tryForm) {
        if (w.length != 2) throw new UsageError(verb + " takes a number of milliseconds");
        long ms;
        try {
          ms = Long.parseLong(w[1]);
        } catch (NumberFormatException e) {
          throw new UsageError(verb + ": not a number: " + w[1]);
        }
        lines.beginBlocking();
        got = lock.acquire(Math.max(0, ms), TimeUnit.MILLISECONDS);
        lines.endBlocking();
      } else {
        lines.beginBlocking();
        lock.acquire();
        lines.endBlocking();
        got = true;
      }
      if (got) {
        held.push(lock);
        out.println(acquiredLine(client, lock));
      } else {
        out.println("timeout");
      }
      out.flush();
    }
    while (!held.isEmpty()) held.pop().release();
    client.close();
    return 0;
  }

  static int latch(Options o) throws Exception {
    if (o.positional.size() != 4) throw new UsageError("latch takes CONNECT latch PATH ID");
    String where = o.arg(0, "CONNECT");
    String path = o.arg(2, "PATH");
    String id = o.arg(3, "ID");
    StdinLines lines = new StdinLines();
    CuratorFramework client = connect(where, o);
    // A closed LeaderLatch cannot start again: each start makes a new one. Reading the leader
    // needs none started (it lists PATH's children and reads the first one's data).
    LeaderLatch observer = new LeaderLatch(client, path, id);
    LeaderLatch latch = null;
    out.println("ready");
    out.flush();
    String[] w;
    while ((w = nextCommand(lines)) != null) {
      if (w[0].equals("start") && latch == null) {
        latch = new LeaderLatch(client, path, id);
        latch.start();
        out.println("started");
      } else if (w[0].equals("await") && w.length == 2 && latch != null) {
        lines.beginBlocking();
        boolean leads = latch.await(Math.max(0, Long.parseLong(w[1])), TimeUnit.MILLISECONDS);
        lines.endBlocking();
        out.println(leads ? "leader" : "timeout");
      } else if (w[0].equals("leader")) {
        Participant leader = observer.getLeader();
        out.println(leader.isLeader() ? "leader-id " + leader.getId() : "no-leader");
      } else if (w[0].equals("close") && latch != null) {
        latch.close();
        latch = null;
        out.println("closed");
      } else {
        throw new UsageError("unknown or out-of-order command for latch: " + String.join(" ", w));
      }
      out.flush();
    }
    if (latch != null) latch.close();
    client.close();
    return 0;
  }

  // ------------------------------------------------------------------ semaphore

  static int semaphore(Options o) throws Exception {
    if (o.positional.size() != 4) throw new UsageError("semaphore takes CONNECT semaphore PATH PERMITS");
    String where = o.arg(0, "CONNECT");
    String path = o.arg(2, "PATH");
    int permits = Integer.parseInt(o.arg(3, "PERMITS"));
    StdinLines lines = new StdinLines();
    CuratorFramework client = connect(where, o);
    InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, permits);
    Deque<Lease> held = new ArrayDeque<>();
    out.println("ready");
    out.flush();
    String[] w;
    while ((w = nextCommand(lines)) != null) {
      if (w[0].equals("release") && !held.isEmpty()) {
        semaphore.returnLease(held.pop());
        out.println("released");
      } else if (w[0].equals("acquire") || (w[0].equals("try-acquire") && w.length == 2)) {
        lines.beginBlocking();
        Lease lease = w.length == 2 ? semaphore.acquire(Math.max(0, Long.parseLong(w[1])), TimeUnit.MILLISECONDS)
                                    : semaphore.acquire();
        lines.endBlocking();
        if (lease == null) {
          out.println("timeout");
        } else {
          held.push(lease);
          Stat stat = client.checkExists().forPath(path + "/leases/" + lease.getNodeName());
          out.println("acquired " + lease.getNodeName() + " " + (stat == null ? -1 : stat.getCzxid()));
        }
      } else {
        throw new UsageError("unknown or out-of-order command for semaphore: " + String.join(" ", w));
      }
      out.flush();
    }
    while (!held.isEmpty()) semaphore.returnLease(held.pop());
    client.close();
    return 0;
  }

  // ------------------------------------------------------------------ barrier

  static int barrier(Options o) throws Exception {
    if (o.positional.size() != 4) throw new UsageError("barrier takes CONNECT barrier PATH MEMBERS");
    String where = o.arg(0, "CONNECT");
    String path = o.arg(2, "PATH");
    int members = (int) o.argNumber(3, "MEMBERS", 1, Integer.MAX_VALUE);
    StdinLines lines = new StdinLines();
    CuratorFramework client = connect(where, o);
    DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(client, path, members);
    out.println("ready");
    out.flush();
    String[] w;
    while ((w = nextCommand(lines)) != null) {
      boolean enter = w[0].equals("enter");
      if ((!enter && !w[0].equals("leave")) || w.length > 2) {
        throw new UsageError("unknown command for barrier: " + String.join(" ", w));
      }
      lines.beginBlocking();
      boolean done;
      if (w.length == 2) {
        long ms = Math.max(0, Long.parseLong(w[1]));
        done = enter ? barrier.enter(ms, TimeUnit.MILLISECONDS) : barrier.leave(ms, TimeUnit.MILLISECONDS);
      } else {
        if (enter) {
          barrier.enter();
        } else {
          barrier.leave();
        }
        done = true;
      }
      lines.endBlocking();
      out.println(done ? (enter ? "entered" : "left") : "timeout");
      out.flush();
    }
    client.close();
    return 0;
  }

  // ------------------------------------------------------------------ contend

  static long readCounter(FileChannel ch) throws IOException {
    ByteBuffer buf = ByteBuffer.allocate(64);
    ch.position(0);
    while (buf.hasRemaining() && ch.read(buf) > 0) {
      // Read up to 64 bytes: a decimal long fits.
    }
    String s = new String(buf.array(), 0, buf.position(), StandardCharsets.US_ASCII).trim();
    return s.isEmpty() ? 0 : Long.parseLong(s);
  }

  static void writeCounter(FileChannel ch, long value) throws IOException {
    ch.truncate(0);
    ch.position(0);
    ByteBuffer buf = ByteBuffer.wrap((value + "\n").getBytes(StandardCharsets.US_ASCII));
    while (buf.hasRemaining()) ch.write(buf);
  }

  static int contend(Options o) throws Exception {
    if (o.positional.size() < 5 || o.positional.size() > 6) {
      throw new UsageError("contend takes CONNECT PATH ITERATIONS COUNTER_FILE [INTERVAL_LOG]");
    }
    String where = o.arg(1, "CONNECT");
    String path = o.arg(2, "PATH");
    long iterations = (long) o.argNumber(3, "ITERATIONS", 0, 10_000_000);
    Path counter = Paths.get(o.arg(4, "COUNTER_FILE"));
    Path log = Paths.get(o.positional.size() == 6 ? o.positional.get(5) : counter + ".log");
    long workUs = o.number("work-us", 1000, 0, 10_000_000);
    String tag = o.named.getOrDefault("tag", "J");
    timeLimit(o);

    StdinLines lines = stdinIsPipe() || o.waitGo ? new StdinLines() : null;
    CuratorFramework client = connect(where, o);
    InterProcessMutex mutex = new InterProcessMutex(client, path);
    out.println("ready");
    out.flush();
    if (o.waitGo) {
      String line;
      while ((line = lines.next()) != null && !line.equals("go")) {
        // Waits for "go" so that every contender starts at once.
      }
      if (line == null) StdinLines.exitBecauseStdinClosed();
    }
    if (lines != null && stdinIsPipe()) exitWhenStdinCloses(lines);

    try (FileChannel ch = FileChannel.open(counter, StandardOpenOption.CREATE, StandardOpenOption.READ,
                                           StandardOpenOption.WRITE);
         FileChannel logCh = FileChannel.open(log, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                                              StandardOpenOption.APPEND)) {
      for (long i = 0; i < iterations; ++i) {
        mutex.acquire();
        long start = System.nanoTime();
        long seen = readCounter(ch);
        if (workUs > 0) TimeUnit.MICROSECONDS.sleep(workUs);
        writeCounter(ch, seen + 1);
        long end = System.nanoTime();
        mutex.release();
        // One write() per line on an O_APPEND file: lines of several writers never interleave.
        ByteBuffer entry = ByteBuffer.wrap((tag + " " + start + " " + end + "\n").getBytes(StandardCharsets.US_ASCII));
        while (entry.hasRemaining()) logCh.write(entry);
      }
    }
    out.println("done " + iterations);
    out.flush();
    client.close();
    return 0;
  }

  // ------------------------------------------------------------------ bench

  /** Nearest-rank percentile of nanosecond samples, in microseconds (as redis_py_peer.py). */
  static double percentileUs(long[] sorted, double q) {
    if (sorted.length == 0) return 0.0;
    int i = (int) Math.max(0, Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1));
    return Math.round(sorted[i] / 100.0) / 10.0;
  }

  static double jain(long[] xs) {
    double s = 0, s2 = 0;
    for (long x : xs) {
      s += x;
      s2 += (double) x * x;
    }
    return xs.length == 0 || s2 == 0 ? 0.0 : Math.round(s * s / (xs.length * s2) * 1000) / 1000.0;
  }

  // The shared state of the bench workers: a file mapped by every worker JVM (MAP_SHARED).
  private static final int COUNTER = 0;
  private static final int LAST_PID = 8;
  private static final int OWNER_CHANGES = 16;
  private static final int SHARED_BYTES = 24;

  /**
   * One bench worker (a JVM of its own, started by bench): "ready" once connected, then on "go"
   * runs until the deadline and prints "result OPS STOPPED TIMEOUTS" and the acquire and release
   * samples (ns), one line each.
   */
  static int benchWorker(Options o) throws Exception {
    String where = o.arg(1, "CONNECT");
    String path = o.arg(2, "PATH");
    double seconds = o.argNumber(3, "SECONDS", 0.001, 600);
    boolean contended = o.arg(4, "WORKLOAD").equals("contended");
    Path shared = Paths.get(o.named.get("worker"));
    long maxOps = o.number("max-ops", 1_000_000, 1, 1_000_000_000);
    long warmup = o.number("warmup-ops", 200, 0, 1_000_000);
    timeLimit(o);
    StdinLines lines = new StdinLines();
    CuratorFramework client = connect(where, o);
    InterProcessMutex mutex = new InterProcessMutex(client, path);
    long me = ProcessHandle.current().pid();
    MappedByteBuffer mem;
    try (FileChannel ch = FileChannel.open(shared, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      mem = ch.map(FileChannel.MapMode.READ_WRITE, 0, SHARED_BYTES);
    }
    // Warm up (JIT, connection) before the clock starts: the other peers are not JIT-compiled.
    long warmupEnd = System.nanoTime() + 1_000_000_000L;
    for (long i = 0; i < warmup && System.nanoTime() < warmupEnd; ++i) {
      mutex.acquire();
      mutex.release();
    }
    out.println("ready");
    out.flush();
    String go = lines.next();
    if (!"go".equals(go)) StdinLines.exitBecauseStdinClosed();
    exitWhenStdinCloses(lines);
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    long[] acq = new long[1024];
    long[] rel = new long[1024];
    int n = 0;
    long timeouts = 0;
    String stopped = "time_up";
    while (true) {
      if (n >= maxOps) {
        stopped = "max_ops";
        break;
      }
      long t0 = System.nanoTime();
      if (t0 >= deadline) break;
      if (!mutex.acquire(deadline - t0, TimeUnit.NANOSECONDS)) {
        ++timeouts;
        break;
      }
      long t1 = System.nanoTime();
      if (contended) {
        // Read, write: correct only if the lock excludes.
        long last = mem.getLong(LAST_PID);
        if (last != me) {
          if (last != 0) mem.putLong(OWNER_CHANGES, mem.getLong(OWNER_CHANGES) + 1);
          mem.putLong(LAST_PID, me);
        }
        long seen = mem.getLong(COUNTER);
        mem.putLong(COUNTER, seen + 1);
      }
      long t2 = System.nanoTime();
      mutex.release();
      long t3 = System.nanoTime();
      if (n == acq.length) {
        acq = Arrays.copyOf(acq, n * 2);
        rel = Arrays.copyOf(rel, n * 2);
      }
      acq[n] = t1 - t0;
      rel[n] = t3 - t2;
      ++n;
    }
    long end = System.nanoTime();
    StringBuilder b = new StringBuilder();
    b.append("result ").append(n).append(' ').append(stopped).append(' ').append(timeouts).append(' ').append(end).append('\n');
    for (long[] samples : new long[][] {acq, rel}) {
      for (int i = 0; i < n; ++i) b.append(i == 0 ? "" : " ").append(samples[i]);
      b.append('\n');
    }
    out.print(b);
    out.flush();
    client.close();
    return 0;
  }

  static long[] parseSamples(String line) {
    if (line == null || line.isEmpty()) return new long[0];
    return Arrays.stream(line.trim().split(" ")).mapToLong(Long::parseLong).toArray();
  }

  static int bench(Options o) throws Exception {
    if (o.positional.size() != 5) throw new UsageError("bench takes CONNECT PATH SECONDS uncontended|contended");
    String where = o.arg(1, "CONNECT");
    String path = o.arg(2, "PATH");
    double seconds = o.argNumber(3, "SECONDS", 0.001, 600);
    String workload = o.arg(4, "WORKLOAD");
    if (!workload.equals("uncontended") && !workload.equals("contended")) {
      throw new UsageError("workload must be uncontended or contended");
    }
    boolean contended = workload.equals("contended");
    int processes = (int) o.number("processes", contended ? 4 : 1, 1, 64);
    if (!contended && processes != 1) throw new UsageError("uncontended is one process by definition");
    long maxOps = o.number("max-ops", 1_000_000, 1, 1_000_000_000);
    long warmup = o.number("warmup-ops", 200, 0, 1_000_000);
    long margin = 15;
    o.named.put("time-limit-s", Long.toString((long) (seconds * 2) + 2 * margin + 30));
    timeLimit(o);
    StdinLines watch = stdinIsPipe() ? new StdinLines() : null;
    if (watch != null) exitWhenStdinCloses(watch);

    Path shared = Files.createTempFile("curator-bench-", ".shm");
    List<Process> workers = new ArrayList<>();
    try {
      Files.write(shared, new byte[SHARED_BYTES]);
      // Each worker is a JVM of its own: its own session, like the other peers' processes.
      String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
      for (int p = 0; p < processes; ++p) {
        List<String> cmd = new ArrayList<>(Arrays.asList(java, "-Xmx128m", "-XX:+UseSerialGC", "-cp",
            System.getProperty("java.class.path"), "CuratorTool", "bench-worker", where, path,
            Double.toString(seconds), workload, "--worker", shared.toString(), "--max-ops", Long.toString(maxOps),
            "--warmup-ops", Long.toString(warmup),
            "--time-limit-s", o.named.get("time-limit-s")));
        for (String k : new String[] {"session-timeout-ms", "connect-timeout-ms", "retries"}) {
          if (o.named.containsKey(k)) {
            cmd.add("--" + k);
            cmd.add(o.named.get(k));
          }
        }
        workers.add(new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start());
      }
      List<BufferedReader> readers = new ArrayList<>();
      for (Process w : workers) {
        BufferedReader r = new BufferedReader(new InputStreamReader(w.getInputStream(), StandardCharsets.US_ASCII));
        readers.add(r);
        String line = r.readLine();
        if (!"ready".equals(line)) throw new IOException("a bench worker failed to start (said " + line + ")");
      }
      long start = System.nanoTime();
      for (Process w : workers) {
        Writer in = new OutputStreamWriter(w.getOutputStream(), StandardCharsets.US_ASCII);
        in.write("go\n");
        in.flush();
      }
      long ops = 0, timeouts = 0, lastEnd = start;
      long[] shares = new long[processes];
      List<long[]> acqs = new ArrayList<>(), rels = new ArrayList<>();
      List<String> stopped = new ArrayList<>();
      for (int p = 0; p < processes; ++p) {
        BufferedReader r = readers.get(p);
        String head = r.readLine();
        if (head == null || !head.startsWith("result ")) throw new IOException("bench worker " + p + " sent no result");
        String[] f = head.split(" ");
        shares[p] = Long.parseLong(f[1]);
        ops += shares[p];
        if (!stopped.contains(f[2])) stopped.add(f[2]);
        timeouts += Long.parseLong(f[3]);
        lastEnd = Math.max(lastEnd, Long.parseLong(f[4]));
        acqs.add(parseSamples(r.readLine()));
        rels.add(parseSamples(r.readLine()));
      }
      for (Process w : workers) {
        if (!w.waitFor(margin, TimeUnit.SECONDS)) throw new IOException("a bench worker did not exit");
        if (w.exitValue() != 0) throw new IOException("a bench worker exited with status " + w.exitValue());
      }
      long[] acq = acqs.stream().flatMapToLong(Arrays::stream).sorted().toArray();
      long[] rel = rels.stream().flatMapToLong(Arrays::stream).sorted().toArray();
      long counter, ownerChanges;
      try (FileChannel ch = FileChannel.open(shared, StandardOpenOption.READ)) {
        MappedByteBuffer mem = ch.map(FileChannel.MapMode.READ_ONLY, 0, SHARED_BYTES);
        counter = mem.getLong(COUNTER);
        ownerChanges = mem.getLong(OWNER_CHANGES);
      }
      double elapsed = (lastEnd - start) / 1e9;
      long lost = contended ? ops - counter : 0;
      StringBuilder j = new StringBuilder("{");
      Object[][] fields = {
          {"peer", "curator"},
          {"variant", "InterProcessMutex"},
          {"workload", workload},
          {"backend", where},
          {"processes", processes},
          {"threads", 1},
          {"seconds", round(elapsed, 3)},
          {"ops", ops},
          {"ops_per_s", elapsed > 0 ? round(ops / elapsed, 1) : 0},
          {"acquire_p50_us", percentileUs(acq, 0.5)},
          {"acquire_p99_us", percentileUs(acq, 0.99)},
          {"release_p50_us", percentileUs(rel, 0.5)},
          {"release_p99_us", percentileUs(rel, 0.99)},
          {"lost_updates", lost},
          {"owner_changes", ownerChanges},
          {"owner_changes_per_s", elapsed > 0 ? round(ownerChanges / elapsed, 1) : 0},
          {"shares", shares},
          {"jain", jain(shares)},
          {"stopped", String.join(",", stopped)},
          {"inside", contended ? "shared-memory read+write" : "nothing"},
          {"round_trips_per_op", 3},
          {"acquire_timeouts", timeouts},
          {"failed_releases", 0},
          {"session_timeout_ms", o.number("session-timeout-ms", 5000, 1, 600_000)},
          {"curator", curatorVersion()},
          {"warmup_ops_per_process", warmup},
          {"java", System.getProperty("java.version")},
      };
      for (int i = 0; i < fields.length; ++i) {
        j.append(i == 0 ? "" : ", ").append(json(fields[i][0])).append(": ").append(json(fields[i][1]));
      }
      out.println(j.append("}"));
      out.flush();
      return lost == 0 ? 0 : 1;
    } finally {
      for (Process w : workers) {
        if (w.isAlive()) w.destroyForcibly();
      }
      Files.deleteIfExists(shared);
    }
  }

  static double round(double x, int digits) {
    double f = Math.pow(10, digits);
    return Math.round(x * f) / f;
  }

  /** Curator's version, from the pom.properties Maven put in its jar ("?" if absent). */
  static String curatorVersion() {
    try (java.io.InputStream in = InterProcessMutex.class.getResourceAsStream(
             "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
      if (in == null) return "?";
      java.util.Properties p = new java.util.Properties();
      p.load(in);
      return p.getProperty("version", "?");
    } catch (IOException e) {
      return "?";
    }
  }

  static String json(Object v) {
    if (v instanceof String) {
      StringBuilder b = new StringBuilder("\"");
      for (char ch : ((String) v).toCharArray()) {
        if (ch == '"' || ch == '\\') b.append('\\').append(ch);
        else if (ch < 0x20) b.append(String.format(Locale.ROOT, "\\u%04x", (int) ch));
        else b.append(ch);
      }
      return b.append('"').toString();
    }
    if (v instanceof long[]) {
      StringBuilder b = new StringBuilder("[");
      long[] xs = (long[]) v;
      for (int i = 0; i < xs.length; ++i) b.append(i == 0 ? "" : ", ").append(xs[i]);
      return b.append(']').toString();
    }
    return String.valueOf(v);
  }

  // ------------------------------------------------------------------ main

  public static void main(String[] args) {
    int status;
    try {
      Options o = Options.parse(args);
      String first = o.arg(0, "MODE or CONNECT");
      if (first.equals("contend")) {
        status = contend(o);
      } else if (first.equals("bench")) {
        status = bench(o);
      } else if (first.equals("bench-worker")) {
        status = benchWorker(o);
      } else {
        String mode = o.arg(1, "mutex, rwlock, count, atomic-long, latch, semaphore or barrier");
        if (mode.equals("count")) {
          status = count(o);
        } else if (mode.equals("latch")) {
          status = latch(o);
        } else if (mode.equals("atomic-long")) {
          status = atomicLong(o);
        } else if (mode.equals("semaphore")) {
          status = semaphore(o);
        } else if (mode.equals("barrier")) {
          status = barrier(o);
        } else {
          if (!mode.equals("mutex") && !mode.equals("rwlock")) throw new UsageError("unknown mode " + mode);
          status = interactive(mode, o);
        }
      }
    } catch (UsageError e) {
      System.err.println("CuratorTool: " + e.getMessage() + " (usage: see the comment at the top of CuratorTool.java)");
      status = 64;
    } catch (Exception e) {
      System.err.println("CuratorTool: " + e);
      status = 70;
    }
    out.flush();
    System.exit(status);
  }
}
