// A deadline on reading each request: a client gets `seconds` from the end of its previous
// answer (or its connection) to a complete request, headers and body, or its connection is
// shut down.
//
// Why: cpp-httplib's timeouts are per read, so a client that trickles one byte every few
// seconds holds a worker for as long as it likes, and a few dozen such clients (no token
// needed: they never finish a request) starve the server. The library gives no handle on the
// connections it serves, so a watchdog finds them itself: every second it lists the process's
// TCP sockets on the server's port, by peer address, and shuts down those that have been
// reading for too long. A connection whose request is being handled (the route calls
// Handling) is exempt until its answer is written (Answered): a long event watch is not a
// slow client; but one whose peer has closed its end (a killed follower) is noted, so that a
// stream that writes nothing for long (a plain log follow) learns that its reader is gone. An idle
// keep-alive connection is closed by the library after 5 s anyway.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace berth {

class RequestDeadline {
 public:
  // Watches the connections to local TCP port `port`.
  RequestDeadline(int port, double seconds);
  ~RequestDeadline();
  RequestDeadline(const RequestDeadline&) = delete;
  RequestDeadline& operator=(const RequestDeadline&) = delete;

  // The request from this peer is complete and being handled.
  void Handling(const std::string& address, int port);
  // Its answer is written; the next request's time starts now.
  void Answered(const std::string& address, int port);
  // Whether the peer of a request being handled has closed its connection, as of the last
  // sweep (a second ago at most): a stream to it (a watch, a log follow) may end, although
  // nothing written to it has failed yet.
  bool PeerClosed(const std::string& address, int port) const;
  // Connections shut down for being too slow, so far.
  long dropped() const;

 private:
  void Watch();
  void Sweep();

  const int port_;
  const double seconds_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::map<std::string, double> handling_;  // peers whose request is being handled, since
  std::map<std::string, double> reading_;   // peer -> when its current request began
  std::set<std::string> closed_;            // peers being handled that closed their end
  long dropped_ = 0;
  std::thread watcher_;
};

}  // namespace berth
