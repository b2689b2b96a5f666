// libudt-peer: the reference UDT 4.11 stack (Debian's libudt) behind the same
// command-line contract as our Rust `udt` tool (docs/cli.md), so that the
// interop tests, the benchmark and the testbed can swap stacks by swapping the
// binary.
//
//   libudt-peer recv --listen ADDR:PORT --output PATH [--rendezvous PEER]
//   libudt-peer recv --listen ADDR:PORT --connections N --output DIR
//   libudt-peer send --connect ADDR:PORT --input PATH [--bind LOCAL] [--rendezvous]
//   common: --mss N  --dgram  --msg-size N  --stats PATH  --stats-interval MS
//
// Build: make build/libudt-peer   (g++ ... -ludt, Debian package libudt-dev)
//
// Why the send side polls UDT_SNDDATA before close(): "exit 0" must mean "every
// byte was acknowledged". libudt's close() lingers while the send buffer is not
// empty, but it cannot report whether the linger ended because the buffer
// drained or because the connection broke. Polling the send buffer and the
// socket state tells the two apart.

#include <udt/udt.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

const char* const kProg = "libudt-peer";
const int kDefaultMsgSize = 64 * 1024;
const int kMaxMsgSize = 1024 * 1024;   // receive buffer for a message in --dgram mode
const int kStreamChunk = 4 * 1024 * 1024;
// Send-side buffers only: neither is visible on the wire (the receive buffer
// and the flow window, which the handshake advertises, keep 4.11's defaults).
const int kUdtSndBuf = 64 * 1024 * 1024;
const int kUdpSndBuf = 8 * 1024 * 1024;

const char* const kUsage =
    "usage:\n"
    "  libudt-peer recv --listen ADDR:PORT --output PATH [options]\n"
    "  libudt-peer recv --listen LOCAL:PORT --rendezvous PEER:PORT --output PATH [options]\n"
    "  libudt-peer recv --listen ADDR:PORT --connections N --output DIR [options]\n"
    "  libudt-peer send --connect ADDR:PORT --input PATH [--bind LOCAL:PORT] [options]\n"
    "  libudt-peer send --connect PEER:PORT --bind LOCAL:PORT --rendezvous --input PATH [options]\n"
    "\n"
    "UDT 4.11 (Debian libudt) peer with the same command line as the Rust `udt` tool.\n"
    "\n"
    "recv accepts one connection, writes every byte received to PATH ('-' = stdout)\n"
    "and exits 0 once the peer closed and everything was written.\n"
    "recv --connections N (N > 1) accepts N connections on the one port, serves\n"
    "them concurrently (a thread each), writes each to DIR/conn-K.bin (K = accept\n"
    "order from 1; DIR is created if missing) and exits 0 once all N peers closed\n"
    "and everything was written; a failing connection ends it with an error\n"
    "naming the connection. STREAM only: not with --dgram or --rendezvous.\n"
    "send sends PATH ('-' = stdin) and exits 0 only when every byte was acknowledged.\n"
    "\n"
    "options:\n"
    "  --mss N               UDT_MSS in bytes (default 1500; payload = MSS - 44)\n"
    "  --dgram               message mode (SOCK_DGRAM, sendmsg/recvmsg, in order, no TTL)\n"
    "  --msg-size N          send: bytes per message in --dgram mode (default 65536,\n"
    "                        at most 1048576); recv accepts messages up to 1048576\n"
    "  --stats PATH          write JSON stats lines to PATH ('-' = stdout), one every\n"
    "                        interval and a final {\"summary\":true,...} line\n"
    "  --stats-interval MS   stats period in milliseconds (default 100)\n"
    "  --flow-window PKTS    UDT_FC, the largest flow window in packets (default 8192)\n"
    "  --rcvbuf PKTS         UDT_RCVBUF in packets of MSS - 28 bytes (default 8192)\n"
    "  --sndbuf PKTS         UDT_SNDBUF in packets (default 45590, 64 MiB)\n"
    "  --udp-sndbuf BYTES    UDP_SNDBUF, the data socket's kernel send buffer (default\n"
    "                        8 MiB; 4.11's own default is 64 KiB)\n"
    "  --connections N       recv: accept N connections (default 1); with --stats\n"
    "                        every line carries \"conn\":K, one series and one\n"
    "                        summary line per connection\n"
    "  -h, --help            show this help\n"
    "\n"
    "exit status: 0 success, 1 transfer or network failure, 2 usage error\n";

[[noreturn]] void die(int code, const std::string& msg) {
  fprintf(stderr, "%s: error: %s\n", kProg, msg.c_str());
  exit(code);
}

[[noreturn]] void usage_error(const std::string& msg) {
  fprintf(stderr, "%s: error: %s\n(see '%s --help')\n", kProg, msg.c_str(), kProg);
  exit(2);
}

std::string udt_error() {
  return UDT::getlasterror_desc();
}

// The libudt call this thread is in ("connect to ADDR:PORT"), for on_terminate; empty: none.
thread_local std::string t_udt_call;

// 4.11 runs the client's half of the handshake, CUDT::connect(const CPacket&), in the thread
// that called UDT::connect, and declares it throw (). On a response whose body is short of 48
// bytes it keeps the fields it had (zeros, before any cookie reply), sets the connection up with
// MSS 0, fails to allocate buffers of negative size and throws CUDTException 3002: the
// exception specification turns that into std::terminate inside UDT::connect (UDT4.md §5.1).
// No catch of ours can reach it, and none should pretend to: any program that connects with
// 4.11 aborts there, so the reference stack aborts too (docs/conformance/findings-libudt-4.11.md).
// This handler only says what happened — whose defect, provoked by what — in a crash line the
// suite reads, in place of the runtime's bare "terminate called after throwing an instance of".
[[noreturn]] void on_terminate() {
  std::string what = "an unknown exception";
  bool udt = false;
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (CUDTException& x) {
      udt = true;
      what = "CUDTException " + std::to_string(x.getErrorCode()) + " (" + x.getErrorMessage() + ")";
    } catch (std::exception& x) {
      what = x.what();
    } catch (...) {
    }
  }
  if (udt && t_udt_call.rfind("connect", 0) == 0)
    fprintf(stderr,
            "%s: terminate called: libudt 4.11's robustness bug, provoked by the peer's handshake "
            "response (UDT4.md §5.1, §6.1): %s escaped 4.11's throw () handshake code during %s\n",
            kProg, what.c_str(), t_udt_call.c_str());
  else
    fprintf(stderr, "%s: terminate called after %s was thrown %s\n", kProg, what.c_str(),
            t_udt_call.empty() ? "outside any libudt call of this adapter (in a thread of libudt 4.11?)"
                               : ("during " + t_udt_call).c_str());
  abort();
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct Options {
  std::string role;
  std::string listen, connect, bind, rendezvous_peer, input, output, stats;
  bool rendezvous = false;
  bool dgram = false;
  int mss = 0;  // 0: library default
  int msg_size = kDefaultMsgSize;
  int stats_interval_ms = 100;
  int connections = 1;
  int flow_window = 0;  // packets; 0: library default (8192)
  int rcvbuf = 0;       // packets of MSS - 28 bytes; 0: library default
  int sndbuf = 0;       // packets; 0: kUdtSndBuf
  int udp_sndbuf = kUdpSndBuf;  // bytes
};

// Packet-counted buffer options stop where their size in bytes would overflow an int.
const long kMaxBufPkts = 1000000;

long parse_int(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long n = strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
    usage_error(flag + " expects an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "], got '" + v + "'");
  return n;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args)
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      exit(0);
    }
  if (args.empty()) usage_error("missing command 'send' or 'recv'");
  o.role = args[0];
  if (o.role != "send" && o.role != "recv") usage_error("unknown command '" + o.role + "'");

  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--listen" && o.role == "recv") o.listen = value();
    else if (a == "--output" && o.role == "recv") o.output = value();
    else if (a == "--connect" && o.role == "send") o.connect = value();
    else if (a == "--input" && o.role == "send") o.input = value();
    else if (a == "--bind" && o.role == "send") o.bind = value();
    else if (a == "--rendezvous") {
      o.rendezvous = true;
      if (o.role == "recv") o.rendezvous_peer = value();
    } else if (a == "--mss") o.mss = parse_int(a, value(), 76, 65536);
    else if (a == "--dgram") o.dgram = true;
    else if (a == "--msg-size") o.msg_size = parse_int(a, value(), 1, kMaxMsgSize);
    else if (a == "--flow-window") o.flow_window = parse_int(a, value(), 32, kMaxBufPkts);
    else if (a == "--rcvbuf") o.rcvbuf = parse_int(a, value(), 32, kMaxBufPkts);
    else if (a == "--sndbuf") o.sndbuf = parse_int(a, value(), 32, kMaxBufPkts);
    else if (a == "--udp-sndbuf") o.udp_sndbuf = parse_int(a, value(), 1024, 1L << 30);
    else if (a == "--stats") o.stats = value();
    else if (a == "--stats-interval") o.stats_interval_ms = parse_int(a, value(), 1, 3600000);
    else if (a == "--connections" && o.role == "recv") o.connections = parse_int(a, value(), 1, 10000);
    else usage_error("unknown option '" + a + "' for '" + o.role + "'");
  }
  if (o.role == "recv") {
    if (o.listen.empty()) usage_error("recv needs --listen ADDR:PORT");
    if (o.output.empty()) usage_error("recv needs --output PATH");
    if (o.output == "-" && o.stats == "-") usage_error("--output - and --stats - both use stdout");
    if (o.connections > 1) {
      std::string n = "--connections " + std::to_string(o.connections);
      if (o.dgram) usage_error(n + " is STREAM only: it cannot be combined with --dgram");
      if (o.rendezvous) usage_error(n + " needs a listener: it cannot be combined with --rendezvous");
      if (o.output == "-") usage_error(n + " writes one file per connection: --output must be a directory, not -");
    }
  } else {
    if (o.connect.empty()) usage_error("send needs --connect ADDR:PORT");
    if (o.input.empty()) usage_error("send needs --input PATH");
    if (o.rendezvous && o.bind.empty()) usage_error("send --rendezvous needs --bind LOCAL:PORT");
  }
  return o;
}

// ADDR:PORT, [IPv6]:PORT or HOST:PORT -> socket address.
struct Addr {
  sockaddr_storage ss;
  socklen_t len;
  int family() const { return ss.ss_family; }
};

Addr resolve(const std::string& flag, const std::string& s, bool passive) {
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      usage_error(flag + ": bad address '" + s + "' (expected [IPV6]:PORT)");
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos)
      usage_error(flag + ": bad address '" + s + "' (expected ADDR:PORT)");
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  parse_int(flag + " port", port, 0, 65535);
  if (host.empty()) usage_error(flag + ": bad address '" + s + "' (missing host)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) usage_error(flag + ": cannot resolve '" + s + "': " + gai_strerror(rc));
  Addr a{};
  memcpy(&a.ss, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  return a;
}

std::string format_addr(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  port = ntohs(in6->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

// ---------------------------------------------------------------- statistics

// Emits the stats JSON lines of docs/cli.md. The sampling thread and the
// data path share only `bytes` (atomic) and `last` (under `mu`).
class Stats {
 public:
  // `shared` (not null): write to that already open file, which other Stats
  // share, and tag every line with "conn":conn; the caller closes it.
  Stats(const Options& o, UDTSOCKET sock, double t0, FILE* shared = nullptr, int conn = 0)
      : role_(o.role), sock_(sock), t0_(t0), interval_ms_(o.stats_interval_ms), conn_(conn) {
    if (shared) {
      out_ = shared;
      owned_ = false;
      return;
    }
    if (o.stats.empty()) return;
    if (o.stats == "-") {
      out_ = stdout;
    } else {
      out_ = fopen(o.stats.c_str(), "w");
      if (!out_) die(1, "cannot open stats file '" + o.stats + "': " + strerror(errno));
    }
  }

  std::atomic<int64_t> bytes{0};
  // When set, called by the sampler instead of reading `bytes`.
  std::function<int64_t()> bytes_fn;

  // Refreshes the last good perfmon sample. libudt refuses perfmon once the
  // peer has closed, so the summary uses the last sample taken before that.
  void sample() {
    UDT::TRACEINFO p;
    if (UDT::perfmon(sock_, &p, false) != UDT::ERROR) {
      std::lock_guard<std::mutex> g(mu_);
      last_ = p;
      have_ = true;
    }
  }

  void start() {
    if (!out_) return;
    thread_ = std::thread([this] { run(); });
  }

  // Stops the sampler and writes the summary line.
  void finish(int64_t total_bytes) {
    double t = now_s() - t0_;
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (!out_) return;
    double mbps = t > 0 ? total_bytes * 8.0 / t / 1e6 : 0.0;
    write_line(t, total_bytes, mbps, true);
    if (!owned_) return;
    if (out_ != stdout) fclose(out_);
    else fflush(out_);
  }

 private:
  void run() {
    double last_t = 0;
    int64_t last_bytes = 0;
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::milliseconds(interval_ms_));
      if (stop_) break;
      lk.unlock();
      sample();
      double t = now_s() - t0_;
      int64_t b = bytes_fn ? bytes_fn() : bytes.load();
      double dt = t - last_t;
      double mbps = dt > 0 ? (b - last_bytes) * 8.0 / dt / 1e6 : 0.0;
      write_line(t, b, mbps, false);
      last_t = t;
      last_bytes = b;
      lk.lock();
    }
  }

  void write_line(double t, int64_t b, double mbps, bool summary) {
    UDT::TRACEINFO p{};
    {
      std::lock_guard<std::mutex> g(mu_);
      if (have_) p = last_;
    }
    bool send = role_ == "send";
    char line[1024];
    int len = snprintf(line, sizeof line,
            "{\"stack\":\"libudt\",\"role\":\"%s\",\"t\":%.6f,\"bytes\":%lld,\"mbps\":%.3f,"
            "\"rtt_ms\":%.3f,\"flow_window\":%d,\"cwnd\":%.3f,\"period_us\":%.3f,"
            "\"losses\":%d,\"retrans\":%d,\"pkts_sent\":%lld,\"pkts_recv\":%lld,"
            "\"acks_sent\":%d,\"acks_recv\":%d,\"naks_sent\":%d,\"naks_recv\":%d",
            role_.c_str(), t, (long long)b, mbps, p.msRTT, p.pktFlowWindow,
            (double)p.pktCongestionWindow, p.usPktSndPeriod,
            send ? p.pktSndLossTotal : p.pktRcvLossTotal, p.pktRetransTotal,
            (long long)p.pktSentTotal, (long long)p.pktRecvTotal, p.pktSentACKTotal,
            p.pktRecvACKTotal, p.pktSentNAKTotal, p.pktRecvNAKTotal);
    std::string l(line, len > 0 ? std::min<size_t>(static_cast<size_t>(len), sizeof line - 1) : 0);
    if (send) {
      // 4.11's mbpsBandwidth is its smoothed link-capacity estimate (m_iBandwidth, packets/s)
      // times the payload's bits: back to packets/s, as udt-rs prints it.
      int mss = 1500, optlen = sizeof mss;
      UDT::getsockopt(sock_, 0, UDT_MSS, &mss, &optlen);
      double pps = p.mbpsBandwidth * 1e6 / 8.0 / (mss - 44);
      snprintf(line, sizeof line, ",\"bandwidth_pps\":%lld", (long long)llround(pps));
      l += line;
    }
    if (conn_ > 0) l += ",\"conn\":" + std::to_string(conn_);
    if (summary) {
      snprintf(line, sizeof line, ",\"summary\":true,\"seconds\":%.6f", t);
      l += line;
    }
    l += "}\n";
    // One write per line: several connections may share the file.
    static std::mutex write_mu;
    std::lock_guard<std::mutex> g(write_mu);
    fputs(l.c_str(), out_);
    fflush(out_);
  }

  std::string role_;
  UDTSOCKET sock_;
  double t0_;
  int interval_ms_;
  int conn_ = 0;
  FILE* out_ = nullptr;
  bool owned_ = true;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool have_ = false;
  UDT::TRACEINFO last_{};
};

// ---------------------------------------------------------------- sockets

void set_opt(UDTSOCKET s, UDT::SOCKOPT opt, const void* v, int len, const char* name) {
  if (UDT::setsockopt(s, 0, opt, v, len) == UDT::ERROR)
    die(1, std::string("setsockopt(") + name + "): " + udt_error());
}

UDTSOCKET make_socket(const Options& o, int family) {
  UDTSOCKET s = UDT::socket(family, o.dgram ? SOCK_DGRAM : SOCK_STREAM, 0);
  if (s == UDT::INVALID_SOCK) die(1, "cannot create UDT socket: " + udt_error());
  if (o.mss) set_opt(s, UDT_MSS, &o.mss, sizeof(int), "UDT_MSS");
  // 4.11 counts both buffers in packets of MSS - 28 bytes and cuts UDT_RCVBUF to UDT_FC when
  // it is set, so the flow window goes first (UDT4.md §13).
  const int payload = (o.mss ? o.mss : 1500) - 28;
  if (o.flow_window) set_opt(s, UDT_FC, &o.flow_window, sizeof(int), "UDT_FC");
  if (o.rcvbuf) {
    int bytes = o.rcvbuf * payload;
    set_opt(s, UDT_RCVBUF, &bytes, sizeof(int), "UDT_RCVBUF");
  }
  int snd = o.sndbuf ? o.sndbuf * payload : kUdtSndBuf;
  set_opt(s, UDT_SNDBUF, &snd, sizeof(int), "UDT_SNDBUF");
  set_opt(s, UDP_SNDBUF, &o.udp_sndbuf, sizeof(int), "UDP_SNDBUF");
  if (o.rendezvous) {
    bool on = true;
    set_opt(s, UDT_RENDEZVOUS, &on, sizeof on, "UDT_RENDEZVOUS");
  }
  return s;
}

void do_bind(UDTSOCKET s, const Addr& a, const std::string& text) {
  if (UDT::bind(s, reinterpret_cast<const sockaddr*>(&a.ss), a.len) != UDT::ERROR) return;
  std::string why = udt_error();
  // libudt drops the system errno from its message; a plain UDP bind recovers it.
  int u = ::socket(a.family(), SOCK_DGRAM, 0);
  if (u >= 0 && ::bind(u, reinterpret_cast<const sockaddr*>(&a.ss), a.len) != 0)
    why = strerror(errno);
  if (u >= 0) ::close(u);
  die(1, "cannot bind " + text + ": " + why);
}

void do_connect(UDTSOCKET s, const Addr& a, const std::string& text) {
  t_udt_call = "connect to " + text;
  int r = UDT::connect(s, reinterpret_cast<const sockaddr*>(&a.ss), a.len);
  t_udt_call.clear();
  if (r == UDT::ERROR) die(1, "cannot connect to " + text + ": " + udt_error());
}

int payload_size(UDTSOCKET s) {
  int mss = 1500, len = sizeof mss;
  UDT::getsockopt(s, 0, UDT_MSS, &mss, &len);
  return mss - 44;
}

// ---------------------------------------------------------------- recv

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int run_recv(const Options& o) {
  int fd = STDOUT_FILENO;
  if (o.output != "-") {
    fd = open(o.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die(1, "cannot open output '" + o.output + "': " + strerror(errno));
  }
  Addr local = resolve("--listen", o.listen, true);
  UDTSOCKET s = make_socket(o, local.family());
  do_bind(s, local, o.listen);

  UDTSOCKET conn;
  if (o.rendezvous) {
    Addr peer = resolve("--rendezvous", o.rendezvous_peer, false);
    fprintf(stderr, "%s: rendezvous %s <-> %s\n", kProg, o.listen.c_str(), o.rendezvous_peer.c_str());
    do_connect(s, peer, o.rendezvous_peer);
    conn = s;
  } else {
    if (UDT::listen(s, 1) == UDT::ERROR) die(1, "cannot listen on " + o.listen + ": " + udt_error());
    sockaddr_storage bound{};
    int blen = sizeof bound;
    UDT::getsockname(s, reinterpret_cast<sockaddr*>(&bound), &blen);
    fprintf(stderr, "%s: listening on %s\n", kProg, format_addr(reinterpret_cast<sockaddr*>(&bound)).c_str());
    sockaddr_storage peer{};
    int plen = sizeof peer;
    conn = UDT::accept(s, reinterpret_cast<sockaddr*>(&peer), &plen);
    if (conn == UDT::INVALID_SOCK) die(1, "accept failed: " + udt_error());
    fprintf(stderr, "%s: accepted %s\n", kProg, format_addr(reinterpret_cast<sockaddr*>(&peer)).c_str());
    UDT::close(s);
  }

  Stats stats(o, conn, now_s());
  stats.sample();
  stats.start();

  // 4.11's blocking recvmsg() can dequeue a message and then throw "connection
  // lost" when the peer's shutdown arrives while it sleeps: the message is
  // gone. So in --dgram mode we sleep in epoll until data is there and call
  // recvmsg() only then, and after "connection lost" we call it once more,
  // because once broken it hands out what is left before it fails for good.
  int eid = o.dgram ? UDT::epoll_create() : -1;
  if (eid >= 0) {
    int ev = UDT_EPOLL_IN | UDT_EPOLL_ERR;
    UDT::epoll_add_usock(eid, conn, &ev);
  }
  std::vector<char> buf(o.dgram ? kMaxMsgSize : kStreamChunk);
  int64_t total = 0;
  double last_sample = now_s();
  int lost = 0;
  for (;;) {
    if (o.dgram && lost == 0 && UDT::getsockstate(conn) == CONNECTED) {
      int32_t avail = 0;
      int len = sizeof avail;
      if (UDT::getsockopt(conn, 0, UDT_RCVDATA, &avail, &len) != UDT::ERROR && avail == 0) {
        std::set<UDTSOCKET> readable;
        if (eid < 0 || UDT::epoll_wait(eid, &readable, nullptr, 100) == UDT::ERROR) usleep(1000);
        continue;
      }
    }
    int n = o.dgram ? UDT::recvmsg(conn, buf.data(), static_cast<int>(buf.size()))
                    : UDT::recv(conn, buf.data(), static_cast<int>(buf.size()), 0);
    if (n == UDT::ERROR) {
      // 2001 (ECONNLOST) / 2002 (ENOCONN): the peer closed and the receive
      // buffer is drained. That is the end of the stream. 5004 (EINVSOCK) is
      // the same end seen later: 4.11's garbage collector (checkBrokenSockets,
      // about once a second) marks a broken socket whose receive buffer is
      // empty CLOSED, and a closed socket is not found any more; a receiver
      // that was descheduled meanwhile gets EINVSOCK, not ECONNLOST (seen
      // 1 run in 5-10 in rendezvous --dgram between two 4.11 peers on a
      // loaded host). What arrived is checked by whoever compares the output.
      int code = UDT::getlasterror_code();
      if (code == CUDTException::EINVSOCK) break;
      if (code == CUDTException::ECONNLOST || code == CUDTException::ENOCONN) {
        if (!o.dgram || ++lost >= 2) break;
        continue;
      }
      die(1, "receive failed after " + std::to_string(total) + " bytes: " + udt_error());
    }
    lost = 0;
    if (n > 0 && !write_all(fd, buf.data(), static_cast<size_t>(n)))
      die(1, "cannot write output '" + o.output + "' after " + std::to_string(total) +
                 " bytes: " + strerror(errno));
    total += n;
    stats.bytes.store(total);
    double t = now_s();
    if (t - last_sample > 0.005) {  // keep the summary's counters fresh
      stats.sample();
      last_sample = t;
    }
  }
  if (eid >= 0) UDT::epoll_release(eid);
  if (fd != STDOUT_FILENO && close(fd) != 0)
    die(1, "cannot write output '" + o.output + "': " + strerror(errno));
  stats.finish(total);
  UDT::close(conn);
  fprintf(stderr, "%s: received %lld bytes\n", kProg, (long long)total);
  return 0;
}

// ---------------------------------------------------------------- recv --connections N

// One connection of `recv --connections N`: the STREAM loop of run_recv into
// its own file. A failure ends the whole process at once (exit 1) with a
// message naming the connection; _exit, because other threads are still in
// libudt and exit()'s static destructors would tear it down under them.
void serve_connection(const Options& o, UDTSOCKET conn, int k, const std::string& peer,
                      const std::string& path, FILE* stats_out) {
  const std::string who = "connection " + std::to_string(k) + " of " +
                          std::to_string(o.connections) + " (from " + peer + ")";
  auto fail = [&](const std::string& msg) {
    fprintf(stderr, "%s: error: %s: %s\n", kProg, who.c_str(), msg.c_str());
    fflush(stderr);
    _exit(1);
  };
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("cannot open output '" + path + "': " + strerror(errno));
  Stats stats(o, conn, now_s(), stats_out, k);
  stats.sample();
  stats.start();
  std::vector<char> buf(kStreamChunk);
  int64_t total = 0;
  double last_sample = now_s();
  for (;;) {
    int n = UDT::recv(conn, buf.data(), static_cast<int>(buf.size()), 0);
    if (n == UDT::ERROR) {
      int code = UDT::getlasterror_code();
      if (code == CUDTException::ECONNLOST || code == CUDTException::ENOCONN) break;
      fail("receive failed after " + std::to_string(total) + " bytes: " + udt_error());
    }
    if (n > 0 && !write_all(fd, buf.data(), static_cast<size_t>(n)))
      fail("cannot write output '" + path + "' after " + std::to_string(total) + " bytes: " + strerror(errno));
    total += n;
    stats.bytes.store(total);
    double t = now_s();
    if (t - last_sample > 0.005) {
      stats.sample();
      last_sample = t;
    }
  }
  if (close(fd) != 0) fail("cannot write output '" + path + "': " + strerror(errno));
  stats.finish(total);
  UDT::close(conn);
  fprintf(stderr, "%s: %s: received %lld bytes\n", kProg, who.c_str(), (long long)total);
}

int run_recv_many(const Options& o) {
  const int n = o.connections;
  std::error_code ec;
  std::filesystem::create_directories(o.output, ec);
  if (ec) die(1, "cannot create output directory '" + o.output + "': " + ec.message());
  struct stat st;
  if (stat(o.output.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    die(1, "output '" + o.output + "' is not a directory");
  FILE* stats_out = nullptr;
  if (!o.stats.empty()) {
    stats_out = o.stats == "-" ? stdout : fopen(o.stats.c_str(), "w");
    if (!stats_out) die(1, "cannot open stats file '" + o.stats + "': " + strerror(errno));
  }
  Addr local = resolve("--listen", o.listen, true);
  UDTSOCKET s = make_socket(o, local.family());
  do_bind(s, local, o.listen);
  if (UDT::listen(s, n) == UDT::ERROR) die(1, "cannot listen on " + o.listen + ": " + udt_error());
  sockaddr_storage bound{};
  int blen = sizeof bound;
  UDT::getsockname(s, reinterpret_cast<sockaddr*>(&bound), &blen);
  fprintf(stderr, "%s: listening on %s, accepting %d connections\n", kProg,
          format_addr(reinterpret_cast<sockaddr*>(&bound)).c_str(), n);
  std::string dir = o.output;
  if (dir.back() != '/') dir += '/';
  std::vector<std::thread> workers;
  for (int k = 1; k <= n; ++k) {
    sockaddr_storage peer{};
    int plen = sizeof peer;
    UDTSOCKET conn = UDT::accept(s, reinterpret_cast<sockaddr*>(&peer), &plen);
    if (conn == UDT::INVALID_SOCK) {
      fprintf(stderr, "%s: error: accepting connection %d of %d failed: %s\n", kProg, k, n, udt_error().c_str());
      fflush(stderr);
      _exit(1);
    }
    std::string from = format_addr(reinterpret_cast<sockaddr*>(&peer));
    fprintf(stderr, "%s: accepted connection %d of %d from %s\n", kProg, k, n, from.c_str());
    std::string path = dir + "conn-" + std::to_string(k) + ".bin";
    workers.emplace_back(serve_connection, std::cref(o), conn, k, from, path, stats_out);
  }
  for (auto& w : workers) w.join();
  UDT::close(s);
  if (stats_out && stats_out != stdout && fclose(stats_out) != 0)
    die(1, "cannot write stats file '" + o.stats + "': " + strerror(errno));
  if (stats_out == stdout) fflush(stdout);
  fprintf(stderr, "%s: received %d connections\n", kProg, n);
  return 0;
}

// ---------------------------------------------------------------- send

// Send-buffer occupancy in packets, or -1 if the connection is gone.
int unacked_packets(UDTSOCKET s) {
  UDTSTATUS st = UDT::getsockstate(s);
  if (st != CONNECTED) return -1;
  int32_t n = 0;
  int len = sizeof n;
  if (UDT::getsockopt(s, 0, UDT_SNDDATA, &n, &len) == UDT::ERROR) return -1;
  return n;
}

int run_send(const Options& o) {
  int fd = STDIN_FILENO;
  bool regular = false;
  int64_t file_size = 0;
  if (o.input != "-") {
    fd = open(o.input.c_str(), O_RDONLY);
    if (fd < 0) die(1, "cannot open input '" + o.input + "': " + strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      regular = true;
      file_size = st.st_size;
    }
  }
  Addr peer = resolve("--connect", o.connect, false);
  UDTSOCKET s = make_socket(o, peer.family());
  if (!o.bind.empty()) do_bind(s, resolve("--bind", o.bind, true), o.bind);
  do_connect(s, peer, o.connect);
  fprintf(stderr, "%s: connected to %s\n", kProg, o.connect.c_str());
  const double connected_at = now_s();

  Stats stats(o, s, connected_at);
  const int payload = payload_size(s);
  std::atomic<int64_t> handed_total{0};  // bytes accepted by the library
  int64_t handed = 0;
  // `bytes` in the sender's stats means acknowledged bytes: what was handed
  // over minus what still sits in the send buffer (estimated in whole packets).
  int64_t acked_floor = 0;  // only the sampler thread touches it
  stats.bytes_fn = [&]() {
    int64_t h = handed_total.load();
    int pk = unacked_packets(s);
    int64_t acked = h - (pk > 0 ? static_cast<int64_t>(pk) * payload : 0);
    if (acked < acked_floor) acked = acked_floor;
    if (acked > h) acked = h;
    acked_floor = acked;
    return acked;
  };
  stats.sample();
  stats.start();

  auto send_failed = [&](const char* what) {
    die(1, std::string(what) + " failed after " + std::to_string(handed) + " bytes to " +
               o.connect + ": " + udt_error());
  };

  if (regular && !o.dgram) {
    // UDT::sendfile2 reads the file straight into the send buffer. Called in
    // slices so that the stats see progress.
    const int64_t slice = 8LL * 1024 * 1024;
    while (handed < file_size) {
      int64_t off = handed;
      int64_t want = std::min(slice, file_size - handed);
      int64_t n = UDT::sendfile2(s, o.input.c_str(), &off, want);
      if (n == UDT::ERROR || n <= 0) send_failed("sendfile");
      handed += n;
      handed_total.store(handed);
    }
  } else {
    std::vector<char> buf(o.dgram ? o.msg_size : kStreamChunk);
    for (;;) {
      // In --dgram mode every message is one read of at most --msg-size bytes
      // (a short read from a pipe makes a short message).
      ssize_t r = read(fd, buf.data(), buf.size());
      if (r < 0) {
        if (errno == EINTR) continue;
        die(1, "cannot read input '" + o.input + "': " + strerror(errno));
      }
      if (r == 0) break;
      if (o.dgram) {
        int n = UDT::sendmsg(s, buf.data(), static_cast<int>(r), -1, true);
        if (n == UDT::ERROR) send_failed("sendmsg");
        handed += n;
      } else {
        const char* p = buf.data();
        ssize_t left = r;
        while (left > 0) {
          int n = UDT::send(s, p, static_cast<int>(left), 0);
          if (n == UDT::ERROR) send_failed("send");
          p += n;
          left -= n;
          handed += n;
        }
      }
      handed_total.store(handed);
    }
  }
  if (fd != STDIN_FILENO) close(fd);

  // Wait for the acknowledgement of every byte.
  for (;;) {
    int pk = unacked_packets(s);
    if (pk < 0)
      die(1, "connection to " + o.connect + " lost before all data was acknowledged (" +
                 std::to_string(handed) + " bytes handed to libudt)");
    if (pk == 0) break;
    usleep(500);
  }
  stats.sample();
  stats.finish(handed);
  if (o.rendezvous) {
    // 4.11 sends the shutdown packet once. In rendezvous the peer may complete
    // its connect only on our first keep-alive (~300 ms, UDT4.md §16); a
    // shutdown that arrives before then is dropped and the peer hangs until
    // its peer-dead timeout (~46 s). Stay connected until it must be up.
    double age = now_s() - connected_at;
    if (age < 1.0) usleep(static_cast<useconds_t>((1.0 - age) * 1e6));
  }
  // Linger stays at the default (on, 180 s) but the buffer is already empty,
  // so close() only sends the shutdown packet.
  UDT::close(s);
  fprintf(stderr, "%s: sent %lld bytes, all acknowledged\n", kProg, (long long)handed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  std::set_terminate(on_terminate);
  Options o = parse_args(argc, argv);
  UDT::startup();
  int rc = o.role == "send" ? run_send(o) : o.connections > 1 ? run_recv_many(o) : run_recv(o);
  UDT::cleanup();
  return rc;
}
