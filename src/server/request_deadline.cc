#include "server/request_deadline.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <vector>

namespace berth {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "ADDRESS:PORT" as httplib names a request's peer (remote_addr, remote_port).
std::string PeerKey(const std::string& address, int port) {
  return address + ":" + std::to_string(port);
}

// The peer of socket `fd` when it is a TCP connection to local port `port`; "" otherwise.
std::string PeerOf(int fd, int port) {
  sockaddr_storage local{}, peer{};
  socklen_t local_size = sizeof local, peer_size = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) return "";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (local.ss_family == AF_INET) {
    if (ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port) != port) return "";
    const auto* p = reinterpret_cast<sockaddr_in*>(&peer);
    inet_ntop(AF_INET, &p->sin_addr, text, sizeof text);
    return PeerKey(text, ntohs(p->sin_port));
  }
  if (local.ss_family == AF_INET6) {
    if (ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port) != port) return "";
    const auto* p = reinterpret_cast<sockaddr_in6*>(&peer);
    inet_ntop(AF_INET6, &p->sin6_addr, text, sizeof text);
    return PeerKey(text, ntohs(p->sin6_port));
  }
  return "";
}

// The process's open sockets.
std::vector<int> OpenSockets() {
  std::vector<int> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    struct stat st {};
    if (*end == '\0' && end != entry->d_name && fd != dirfd(dir) &&
        fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode))
      out.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  return out;
}

}  // namespace

RequestDeadline::RequestDeadline(int port, double seconds)
    : port_(port), seconds_(seconds), watcher_([this] { Watch(); }) {}

RequestDeadline::~RequestDeadline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  watcher_.join();
}

void RequestDeadline::Handling(const std::string& address, int port) {
  std::lock_guard<std::mutex> lock(mu_);
  handling_[PeerKey(address, port)] = Now();
}

void RequestDeadline::Answered(const std::string& address, int port) {
  const std::string key = PeerKey(address, port);
  std::lock_guard<std::mutex> lock(mu_);
  handling_.erase(key);
  reading_[key] = Now();
}

bool RequestDeadline::PeerClosed(const std::string& address, int port) const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_.count(PeerKey(address, port)) > 0;
}

long RequestDeadline::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void RequestDeadline::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
    lock.unlock();
    Sweep();
    lock.lock();
  }
}

void RequestDeadline::Sweep() {
  const double now = Now();
  std::map<std::string, double> seen;  // the connections open now, with their clocks
  std::set<std::string> closed;
  std::vector<std::pair<int, std::string>> late;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const int fd : OpenSockets()) {
      const std::string peer = PeerOf(fd, port_);
      if (peer.empty()) continue;
      const auto known = reading_.find(peer);
      const double since = known == reading_.end() ? now : known->second;
      seen[peer] = since;
      if (handling_.count(peer) == 0 && now - since > seconds_) late.emplace_back(fd, peer);
      // Handled, and the end of its stream is all there is to read: the peer has gone.
      char next = 0;
      if (handling_.count(peer) != 0 && recv(fd, &next, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
        closed.insert(peer);
    }
    reading_ = std::move(seen);  // a closed connection's clock goes with it
    closed_ = std::move(closed);
    // A connection that closed while handled (its answer never written) leaves its mark;
    // dropped once a sweep no longer sees it, unless it is newer than the listing.
    for (auto it = handling_.begin(); it != handling_.end();)
      it = reading_.count(it->first) == 0 && now - it->second > 1 ? handling_.erase(it) : ++it;
  }
  for (const auto& [fd, peer] : late) {
    // The fd may have closed and been given to a new connection since the listing.
    if (PeerOf(fd, port_) != peer) continue;
    shutdown(fd, SHUT_RDWR);  // the worker's read fails, and it closes the connection
    std::lock_guard<std::mutex> lock(mu_);
    ++dropped_;
  }
}

}  // namespace berth
