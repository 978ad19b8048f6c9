#include "server/http_api.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/file_text.h"
#include "config/limits.h"
#include "protocol/agent_protocol.h"
#include "protocol/log_frames.h"
#include "server/job_listing.h"

namespace berth {
namespace {

using Json = nlohmann::json;

// The answers' type. With the charset, cpp-httplib does not compress them (it compresses only
// the bare type): brotli on a page of 10,000 jobs takes seconds of CPU, far more than sending
// it, and any client could ask for it.
constexpr const char* kJsonType = "application/json; charset=utf-8";
// With a charset too, so that cpp-httplib does not compress it (see kJsonType).
constexpr const char* kTsvType = "text/tab-separated-values; charset=utf-8";

void Reply(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  // Names and specs come from users: bytes that are not UTF-8 become U+FFFD, not an exception.
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n", kJsonType);
}

// The same job as a JSON value, for the answers that add to it.
Json JobJson(const StoredJob& j) {
  std::string text;
  AppendJobJson(j, &text);
  return Json::parse(text);
}

// A decimal integer from `min` to `max`, or ApiError 400 naming the parameter.
int64_t IntParam(const std::string& name, const std::string& text, int64_t min, int64_t max) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min ||
      value > max)
    throw ApiError(400, name + ": expected an integer from " + std::to_string(min) + " to " +
                            std::to_string(max) + ", got \"" + text.substr(0, 40) + "\"");
  return value;
}

// Berth-User: who an anonymous client (a server without tokens) says submits, checked as the
// spec's own user field is.
std::string LoginHeader(const httplib::Request& req) {
  const std::string login = req.get_header_value("Berth-User");
  const auto most = static_cast<size_t>(limits::Get().name_length);
  if (login.size() > most)
    throw ApiError(400, "Berth-User: longer than " + std::to_string(most) + " bytes");
  if (const std::string problem = NameProblem(login, "the header"); !problem.empty())
    throw ApiError(400, "Berth-User: " + problem);
  if (!IsUtf8(login)) throw ApiError(400, "Berth-User: not UTF-8");
  return login;
}

// The job id of a /v1/jobs/{id} path; an id that cannot exist is simply not found.
int64_t JobId(const httplib::Request& req) {
  const std::string text = req.matches[1];
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size())
    throw ApiError(404, "no job " + text.substr(0, 40));
  return id;
}

bool KnownState(const std::string& state) {
  const std::vector<std::string>& known = ControlPlane::JobStates();
  return std::find(known.begin(), known.end(), state) != known.end();
}

JobFilter ListFilter(const httplib::Request& req) {
  JobFilter filter;
  for (const auto& [key, value] : req.params) {
    if (key == "queue") {
      filter.queue = value;
    } else if (key == "state") {
      // One state or several, comma-separated ("pending,scheduled,...": what berth ps lists).
      for (size_t start = 0; start <= value.size();) {
        const size_t end = std::min(value.find(',', start), value.size());
        const std::string state = value.substr(start, end - start);
        if (!KnownState(state)) {
          std::string known;
          for (const std::string& s : ControlPlane::JobStates())
            known += (known.empty() ? "" : ", ") + s;
          throw ApiError(400, "state: unknown state \"" + state.substr(0, 40) +
                                  "\"; known: " + known + " (several: comma-separated)");
        }
        filter.states.insert(state);
        start = end + 1;
      }
    } else if (key == "live") {
      if (value != "1" && value != "0") throw ApiError(400, "live: expected 1 or 0");
      filter.live = value == "1";
    } else if (key == "user")
      filter.user = value;
    else if (key == "limit")
      filter.limit = static_cast<size_t>(IntParam("limit", value, 1, kMaxListLimit));
    else if (key == "after")
      filter.after = IntParam("after", value, 0, INT64_MAX);
    else
      throw ApiError(400, "unknown parameter \"" + key.substr(0, 40) +
                              "\"; known: queue, state, user, live, limit, after");
  }
  return filter;
}

// Runs `handle`, turning what it throws into the JSON error a client can read.
template <typename Handle>
void Answer(httplib::Response& res, Handle handle) {
  try {
    handle();
  } catch (const ApiError& e) {
    Json body = e.detail;
    body["error"] = e.what();
    Reply(res, e.status, body);
    if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  } catch (const StoreError& e) {
    Reply(res, 503, {{"error", std::string("the state store failed: ") + e.what()}});
  }
}

// Whether a Host header ("name", "name:port", "[::1]:port") names this machine's loopback.
bool LoopbackHost(const std::string& host) {
  const size_t end = !host.empty() && host[0] == '[' ? host.find(']') + 1 : host.find(':');
  const std::string name = host.substr(0, end);
  const std::string port = end == std::string::npos ? "" : host.substr(end);
  if (!port.empty() &&
      (port[0] != ':' || port.find_first_not_of("0123456789", 1) != std::string::npos))
    return false;
  if (name == "localhost" || name == "[::1]") return true;
  return name.rfind("127.", 0) == 0 && name.find_first_not_of("0123456789.") == std::string::npos;
}

// A browser's request from another site, or through a name of the attacker's that resolves to
// this loopback server (DNS rebinding), is refused: without tokens every caller is an admin, and
// any page the user visits could otherwise run containers here (a cross-site form POST needs no
// preflight). The CLI and agents send no Origin.
void RefuseCrossSite(const AccessControl& access, const httplib::Request& req) {
  const std::string host = req.get_header_value("Host");
  if (req.has_header("Origin")) {
    const std::string origin = req.get_header_value("Origin");
    if (origin != "http://" + host && origin != "https://" + host)
      throw ApiError(403, "cross-origin request refused (Origin " + origin.substr(0, 100) +
                              "); call the API from the berth CLI, or from a client that sends "
                              "no Origin header");
  }
  if (!access.enabled() && !host.empty() && !LoopbackHost(host))
    throw ApiError(403,
                   "this server has no tokens, so it answers only requests addressed to "
                   "the loopback (Host localhost, 127.0.0.1 or [::1]), not \"" +
                       host.substr(0, 100) + "\"; start it with --tokens to serve others");
}

// The user or admin the request's token names; agents' tokens are for the agent API only.
Caller UserCaller(const AccessControl& access, const httplib::Request& req) {
  RefuseCrossSite(access, req);
  Caller caller = access.Authenticate(req.get_header_value("Authorization"));
  if (caller.agent)
    throw ApiError(403, "an agent token may call only the agent API; use a user token here");
  return caller;
}

// A node agent (its token's kind), or an admin: a server without tokens (loopback only) runs
// its own agents.
Caller AgentCaller(const AccessControl& access, const httplib::Request& req) {
  RefuseCrossSite(access, req);
  Caller caller = access.Authenticate(req.get_header_value("Authorization"));
  if (!caller.agent && !(caller.admin && !access.enabled()))
    throw ApiError(403, "only a node agent's token may call the agent API");
  // An agent token acts for its own node only: one node's token cannot end, or write the logs
  // of, jobs on another.
  if (caller.agent && req.matches.size() > 1 && req.matches[1].str() != caller.user)
    throw ApiError(403, "this agent token is node " + caller.user.substr(0, 80) + "'s; node " +
                            req.matches[1].str().substr(0, 80) +
                            " needs its own (a tokens file line with user: " +
                            req.matches[1].str().substr(0, 80) + ", kind: agent)");
  return caller;
}

// The request is read whole: from here its time is the handler's, not the client's.
void Handling(ApiContext& api, const httplib::Request& req) {
  if (api.deadline != nullptr) api.deadline->Handling(req.remote_addr, req.remote_port);
}

// A parameter given twice is refused: which one counts would be the server's guess. Read from
// the request line, as the library keeps one of two equal `key=value` pairs.
// A body's length is said once, as digits: two lengths (or a junk one) that a proxy in front
// reads otherwise than this server is how requests are smuggled past it (RFC 9112, 6.3).
void RefuseBadContentLength(const httplib::Request& req) {
  const size_t given = req.get_header_value_count("Content-Length");
  if (given > 1)
    throw ApiError(400, "Content-Length is given " + std::to_string(given) +
                            " times; give the body's length once");
  if (given == 1 && req.has_header("Transfer-Encoding"))
    throw ApiError(400, "Content-Length and Transfer-Encoding are both given; give one");
  const std::string length = req.get_header_value("Content-Length");
  if (given == 1 &&
      (length.empty() || length.size() > 19 ||
       !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; })))
    throw ApiError(400, "Content-Length: expected the body's length in bytes, got \"" +
                            length.substr(0, 40) + "\"");
}

void RefuseRepeatedParameters(const httplib::Request& req) {
  const size_t query = req.target.find('?');
  if (query == std::string::npos) return;
  std::set<std::string> seen;
  size_t at = query + 1;
  while (at <= req.target.size()) {
    size_t end = req.target.find('&', at);
    if (end == std::string::npos) end = req.target.size();
    const std::string pair = req.target.substr(at, end - at);
    const std::string key = httplib::detail::decode_url(pair.substr(0, pair.find('=')), true);
    if (!pair.empty() && !seen.insert(key).second)
      throw ApiError(
          400, "parameter \"" + key.substr(0, 40) + "\" is given more than once; give it once");
    at = end + 1;
  }
}

// ApiError 403 unless the caller is an admin; `what` is what it asked to do ("drain a node").
void RequireAdmin(const Caller& caller, const std::string& what) {
  if (!caller.admin)
    throw ApiError(403, "only an admin may " + what + "; " + caller.user + " is not one");
}

// Who may call a route. An admin route is refused to others before anything of the request is
// looked at: a caller without the right hears 403, not what was wrong with the request.
struct RouteAccess {
  bool agents = false;    // the agent API (AgentCaller) instead of users'
  std::string admin_for;  // not empty: admins only, to do this ("change the policy")
};
const RouteAccess kAgents{true, ""};
RouteAccess AdminOnly(const std::string& what) { return {false, what}; }

Caller Authorize(ApiContext& api, const httplib::Request& req, const RouteAccess& access) {
  const Caller caller = access.agents ? AgentCaller(api.access, req) : UserCaller(api.access, req);
  if (!access.admin_for.empty()) RequireAdmin(caller, access.admin_for);
  return caller;
}

// A route for users: `handle(req, res, caller)` runs once the token is known and allowed.
template <typename Handle>
httplib::Server::Handler Route(ApiContext& api, Handle handle, RouteAccess access = {}) {
  return [&api, handle, access](const httplib::Request& req, httplib::Response& res) {
    Handling(api, req);
    Answer(res, [&] {
      const Caller caller = Authorize(api, req, access);
      RefuseRepeatedParameters(req);
      handle(req, res, caller);
    });
  };
}

// Whether the request's body comes in chunks (else its Content-Length says how long it is), as
// the library reads it: the one coding "chunked", in any case.
bool Chunked(const httplib::Request& req) {
  return strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0;
}

// A route with a request body, for users: `handle(req, res, caller, body)` runs once the token
// is known and the body read. The body is read here, counted as it comes: the library bounds
// only a Content-Length body, and a chunked one could otherwise grow without limit. The token
// is checked before.
template <typename Handle>
httplib::Server::HandlerWithContentReader BodyRoute(ApiContext& api, Handle handle,
                                                    RouteAccess access = {}) {
  return [&api, handle, access](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& read) {
    Caller caller;
    bool known = false;
    Answer(res, [&] {
      caller = Authorize(api, req, access);
      RefuseRepeatedParameters(req);
      RefuseBadContentLength(req);
      known = true;
    });
    if (!known) {
      // The body is left unread: on a kept-alive connection it would read as the next request.
      res.set_header("Connection", "close");
      return;
    }
    std::string body;
    const auto reading_since = std::chrono::steady_clock::now();
    bool too_big = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) >
                   kMaxRequestBytes;
    const bool whole = !too_big && read([&](const char* data, size_t size) {
      too_big = body.size() + size > kMaxRequestBytes;
      if (!too_big) body.append(data, size);
      return !too_big;
    });
    if (!whole && !too_big) {
      // The read timed out, or the body's framing was broken (a dropped connection reads the
      // same, but nobody hears the answer).
      if (std::chrono::steady_clock::now() - reading_since >= std::chrono::seconds(kReadTimeoutS)) {
        Reply(res, 408,
              {{"error", "the request body stopped arriving (nothing came for " +
                             std::to_string(kReadTimeoutS) +
                             " s): send it whole, as fast as the network allows"}});
      } else if (Chunked(req)) {
        Reply(res, 400,
              {{"error", "the request body could not be read: its chunked framing is broken"}});
      } else {
        Reply(res, 400,
              {{"error",
                "the request body could not be read: it ended before its Content-Length "
                "of " +
                    req.get_header_value("Content-Length") + " bytes"}});
      }
      return;
    }
    Handling(api, req);
    if (too_big) {
      Reply(res, 413,
            {{"error", "the request body is over the limit of " + std::to_string(kMaxRequestBytes) +
                           " bytes"}});
      return;
    }
    Answer(res, [&] { handle(req, res, caller, body); });
  };
}

Json EventJson(const StoredEvent& e) {
  Json event = {{"seq", e.seq}, {"at", e.at}, {"state", e.state}, {"reason", e.reason}};
  if (e.job != 0) event["job"] = e.job;
  if (!e.node.empty()) event["node"] = e.node;
  return event;
}

// {"events": [...], "next": N}: ask again with since=N for what follows.
Json PageJson(const EventPage& page) {
  Json events = Json::array();
  for (const StoredEvent& e : page.events) events.push_back(EventJson(e));
  return {{"events", events}, {"next", page.next}};
}

struct EventsQuery {
  int64_t since = 0;
  size_t limit = 1000;
  bool watch = false;
};

EventsQuery EventsParams(const httplib::Request& req) {
  EventsQuery query;
  for (const auto& [key, value] : req.params) {
    if (key == "since")
      query.since = IntParam("since", value, 0, INT64_MAX);
    else if (key == "limit")
      query.limit = static_cast<size_t>(IntParam("limit", value, 1, kMaxListLimit));
    else if (key == "watch")
      query.watch = IntParam("watch", value, 0, 1) == 1;
    else
      throw ApiError(400,
                     "unknown parameter \"" + key.substr(0, 40) + "\"; known: since, limit, watch");
  }
  return query;
}

// Whether the reader of the stream that answers `req` has closed its connection (a stream
// learns it otherwise only when a write fails, and a quiet plain log follow writes nothing).
std::function<bool()> ReaderGone(const ApiContext& api, const httplib::Request& req) {
  return [deadline = api.deadline, address = req.remote_addr, port = req.remote_port] {
    return deadline != nullptr && deadline->PeerClosed(address, port);
  };
}

// A cursor past the log's end comes from another log (the state was reset or restored): a
// watch from it would wait in silence for events it never gets.
void RefuseCursorPastNewest(int64_t since, const EventPage& page) {
  if (since > page.newest)
    throw ApiError(400, "since: " + std::to_string(since) + " is past the newest event, " +
                            std::to_string(page.newest) +
                            ": this server's event log does not reach it (its state was reset "
                            "or restored); ask again with since=0");
}

// A watch of the event log: one JSON event per line as they are committed, from after
// `since`, until the client goes or the server stops. An empty line every few seconds of
// quiet finds a client that has gone without a word, and frees its worker.
void StreamEvents(httplib::Server& server, ControlPlane& plane, const Caller& caller, int64_t since,
                  WatchSlots& watches, httplib::Response& res) {
  auto last = std::make_shared<int64_t>(since);
  auto quiet = std::make_shared<int>(0);
  res.set_chunked_content_provider(
      "application/x-ndjson",
      [&server, &plane, caller, last, quiet](size_t, httplib::DataSink& sink) {
        if (!server.is_running()) {
          sink.done();
          return true;
        }
        const EventPage page = plane.EventsAfter(*last, 1000, caller, 1.0);
        std::string lines;
        for (const StoredEvent& e : page.events)
          lines += EventJson(e).dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
        *last = page.next;
        if (page.events.empty() && ++*quiet >= kWatchHeartbeatS) lines = "\n";
        if (lines.empty()) return true;
        *quiet = 0;
        return sink.write(lines.data(), lines.size());
      },
      [&watches, user = caller.user](bool) { watches.Give(user); });
}

// A protocol message's JSON, or ApiError 400 naming what is wrong.
template <typename Parse>
auto Message(const std::string& body, Parse parse) {
  const Json json = Json::parse(body, nullptr, false);
  if (json.is_discarded()) throw ApiError(400, "the body is not JSON");
  try {
    return parse(json);
  } catch (const ProtocolError& e) {
    throw ApiError(400, e.what());
  }
}

// This process's resident memory in bytes; -1 where /proc cannot tell.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident_pages = 0;
  if (!(statm >> pages >> resident_pages)) return -1;
  return resident_pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// Docker's own type for its multiplexed stream.
const char* LogContentType(bool frames) {
  return frames ? "application/vnd.docker.multiplexed-stream" : "text/plain; charset=utf-8";
}

// A job's output from `offset` as it comes, until the job has ended and all of it is sent
// (as frames: protocol/log_frames.h). A client that goes is found only by writing to it, so a
// quiet job's follower gets an empty frame every few seconds; a plain-text follower, to which
// nothing can be written that is not output, is ended after a quiet minute (it asks again
// from the byte it got to), or as soon as the connection watchdog sees its reader gone
// (`gone`). Either way a gone follower's watch is given back.
void StreamLogs(httplib::Server& server, ControlPlane& plane, int64_t id, int64_t offset,
                bool frames, const Caller& caller, WatchSlots& watches,
                const std::function<bool()>& gone, httplib::Response& res) {
  auto next = std::make_shared<int64_t>(offset);
  auto quiet = std::make_shared<int>(0);  // seconds, about: each call waits up to one
  res.set_chunked_content_provider(
      LogContentType(frames),
      [&server, &plane, id, next, frames, quiet, gone](size_t, httplib::DataSink& sink) {
        if (!server.is_running()) {
          sink.done();
          return true;
        }
        // A plain follow of a quiet job writes nothing that would find its reader gone: the
        // connection watchdog's word is taken (so a reader that half-closes is cut: docs/api.md).
        // The others write every few seconds, which finds out for sure.
        if (!frames && gone()) return false;
        // Whether it ended is read before the text: output stored before the end is sent.
        bool ended = false;
        try {
          ended = ControlPlane::Ended(plane.Get(id).state) && !plane.Stopping(id);
        } catch (const ApiError&) {
          ended = true;  // removed meanwhile
        }
        std::string text;
        StderrSpans stderr_spans;
        try {
          text = plane.Logs(id, *next, 64 << 10, ended ? 0 : 1.0, next.get(),
                            frames ? &stderr_spans : nullptr);
        } catch (const ApiError&) {
        }
        if (frames) text = MultiplexedFrames(text, stderr_spans);
        if (text.empty()) {
          if (ended || (!frames && ++*quiet >= kPlainFollowQuietS)) {
            sink.done();
            return true;
          }
          if (frames && ++*quiet >= kWatchHeartbeatS) {
            *quiet = 0;
            // A frame header: stdout, zero bytes of payload.
            static const std::string kEmptyFrame = std::string(1, '\1') + std::string(7, '\0');
            return sink.write(kEmptyFrame.data(), kEmptyFrame.size());
          }
          return true;  // an empty chunk would end the stream
        }
        *quiet = 0;
        return sink.write(text.data(), text.size());
      },
      [&watches, user = caller.user](bool) { watches.Give(user); });
}

// The job, when the caller may see it; another user's job is not found, as if it did not exist.
StoredJob VisibleJob(const ControlPlane& plane, const Caller& caller, int64_t id) {
  StoredJob job = plane.Get(id);
  if (!caller.MayTouch(job.user)) throw ApiError(404, "no job " + std::to_string(id));
  return job;
}

}  // namespace

void WatchSlots::Take(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto held = by_user_.find(user);
  if (held != by_user_.end() && held->second >= kMaxWatchesPerUser)
    throw ApiError(429,
                   "user " + user + " already holds " + std::to_string(kMaxWatchesPerUser) +
                       " watches (log follows and event watches), a user's most; end one " +
                       "(a `berth logs -f`, `berth run` in the foreground, `berth events -f`)");
  if (taken_ >= kMaxWatches)
    throw ApiError(503, "already " + std::to_string(kMaxWatches) + " watches; try again later");
  ++taken_;
  if (!user.empty()) ++by_user_[user];
}

void WatchSlots::Give(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  --taken_;
  if (user.empty()) return;
  if (const auto it = by_user_.find(user); it != by_user_.end() && --it->second <= 0)
    by_user_.erase(it);
}

ApiContext::ApiContext(ControlPlane& plane, const AccessControl& access)
    : plane(plane), access(access) {
  DeclareRequestMetrics(requests);
}

void AddApiRoutes(httplib::Server& server, ApiContext& api) {
  ControlPlane& plane = api.plane;
  WatchSlots& watches = api.watches;
  // Every request is timed for the metrics, and its answer restarts the connection's deadline.
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    NoteRequestStart();
    // A body without Content-Length or chunks ends only when the client closes its side:
    // the library would wait the read timeout for that. Said at once instead.
    const bool with_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
    // Other codings ("gzip, chunked") the library would not read as chunks: it would wait for
    // the close as well.
    if (req.has_header("Transfer-Encoding") && !Chunked(req)) {
      Reply(res, 501,
            {{"error", "Transfer-Encoding: \"" +
                           req.get_header_value("Transfer-Encoding").substr(0, 40) +
                           "\" is not served; send the body with Content-Length, or chunked "
                           "alone"}});
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (with_body && !req.has_header("Content-Length") && !Chunked(req)) {
      Reply(res, 411,
            {{"error", req.method + " without Content-Length: send Content-Length: 0 for no "
                                    "body (curl: -d '' or --json)"}});
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_logger([&api](const httplib::Request& req, const httplib::Response& res) {
    RecordRequest(api.requests, req, res);
    if (api.deadline != nullptr) api.deadline->Answered(req.remote_addr, req.remote_port);
  });
  // Any user's token: the metrics tell what /v1/queues and /v1/nodes do, and no user's jobs.
  server.Get("/metrics",
             Route(api, [&api](const httplib::Request&, httplib::Response& res, const Caller&) {
               res.set_content(MetricsExposition(api.plane, api.requests),
                               "text/plain; version=0.0.4; charset=utf-8");
             }));
  server.Post("/v1/jobs", BodyRoute(api, [&](const httplib::Request& req, httplib::Response& res,
                                             const Caller& caller, const std::string& body) {
                Caller submitter = caller;
                if (caller.user.empty()) submitter.login = LoginHeader(req);
                Reply(res, 201, JobJson(plane.Get(plane.Submit(body, submitter))));
              }));
  server.Get("/v1/jobs", Route(api, [&](const httplib::Request& req, httplib::Response& res,
                                        const Caller& caller) {
               JobFilter filter = ListFilter(req);
               if (!caller.admin) {
                 if (!filter.user.empty() && filter.user != caller.user)
                   throw ApiError(403, "user: " + caller.user +
                                           " may list only its own jobs; drop the parameter");
                 filter.user = caller.user;
               }
               std::string accept = req.get_header_value("Accept");
               std::transform(accept.begin(), accept.end(), accept.begin(),
                              [](unsigned char c) { return std::tolower(c); });
               const bool lines = accept.find("text/tab-separated-values") != std::string::npos;
               std::string body = lines ? kJobListingHeader : "{\"jobs\":[";
               size_t listed = 0;
               int64_t last = 0;
               plane.List(filter, [&](const StoredJob& j, const std::string& reason) {
                 if (lines) {
                   AppendJobLine(j, reason, &body);
                 } else {
                   if (listed > 0) body += ",";
                   AppendJobJson(j, reason, &body);
                 }
                 ++listed;
                 last = j.id;
               });
               // A full page may have more after it: the client asks again from its last id.
               const std::string next = listed == filter.limit ? std::to_string(last) : "null";
               if (lines && next != "null") res.set_header("Berth-Next", next);
               if (!lines) body += "],\"next\":" + next + "}\n";
               res.status = 200;
               res.body = std::move(body);  // set_content would copy megabytes
               res.set_header("Content-Type", lines ? kTsvType : kJsonType);
             }));
  server.Get(
      R"(/v1/jobs/(\d+))",
      Route(api, [&](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
        const StoredJob job = VisibleJob(plane, caller, JobId(req));
        Json body = JobJson(job);
        body["spec"] = job.spec;
        if (ControlPlane::Ended(job.state) && plane.Stopping(job.id)) body["stopping"] = true;
        if (job.state == "pending" || job.state == "scheduled")
          if (std::string why = plane.WhyWaiting(job.id); job.state == "pending" || !why.empty())
            body["waiting"] = std::move(why);
        // Its containers as the agents last reported them: cold starts by phase.
        Json replicas = Json::array();
        for (const auto& [replica, c] : plane.Replicas(job.id))
          replicas.push_back(
              {{"replica", replica},
               {"state", c.state},
               {"exitCode", c.exit_code},
               {"containerId", c.container_id},
               {"error", c.error},
               {"startSeconds", c.phases},
               {"contention",
                {{"cpuPercent", c.cpu_percent},
                 {"memoryPercent", c.memory_percent},
                 {"ioLatencyMs", c.io_latency_ms},
                 {"cpu", c.cpu_grade},
                 {"memory", c.memory_grade},
                 {"io", c.io_grade},
                 {"cpuThrottledPeriods", c.cpu_throttled_periods},
                 {"cpuThrottledSeconds", c.cpu_throttled_seconds},
                 {"memoryBytes", c.memory_bytes},
                 {"memoryLimitBytes", c.memory_limit_bytes},
                 {"ioReadBytes", c.io_read_bytes},
                 {"ioWriteBytes", c.io_write_bytes},
                 {"pressure",
                  {{"cpu", c.cpu_pressure},
                   {"memory", c.memory_pressure},
                   {"io", c.io_pressure}}}}},
               {"network", {{"rxBytes", c.net_rx_bytes}, {"txBytes", c.net_tx_bytes}}}});
        body["replicas"] = replicas;
        Reply(res, 200, body);
      }));
  server.Post(
      R"(/v1/jobs/(\d+)/stop)",
      Route(api, [&](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
        Reply(res, 200, JobJson(plane.Stop(VisibleJob(plane, caller, JobId(req)).id)));
      }));
  server.Delete(R"(/v1/jobs/(\d+))", Route(api, [&](const httplib::Request& req,
                                                    httplib::Response& res, const Caller& caller) {
                  plane.Remove(VisibleJob(plane, caller, JobId(req)).id);
                  res.status = 204;
                }));
  server.Get(
      R"(/v1/jobs/(\d+)/events)",
      Route(api, [&](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
        const EventsQuery query = EventsParams(req);
        if (query.watch)
          throw ApiError(400, "watch: a job's events are not watched; watch /v1/events");
        const EventPage page =
            plane.Events(VisibleJob(plane, caller, JobId(req)).id, query.since, query.limit);
        RefuseCursorPastNewest(query.since, page);
        Reply(res, 200, PageJson(page));
      }));
  server.Get(
      "/v1/queues", Route(api, [&](const httplib::Request&, httplib::Response& res, const Caller&) {
        Json queues = Json::array();
        for (const QueueStatus& q : plane.Queues())
          queues.push_back({{"name", q.name},
                            {"weight", q.weight},
                            {"guaranteeGpus", q.guarantee_gpus},
                            {"fairShareGpus", q.fair_share_gpus},
                            {"usageGpus", q.usage_gpus},
                            {"borrowedGpus", q.borrowed_gpus},
                            {"pendingGpus", q.pending_gpus},
                            {"running", q.running},
                            {"pending", q.pending}});
        const RulesText in_force = plane.InForce();
        Reply(res, 200,
              {{"queues", queues}, {"from", in_force.queues_from}, {"yaml", in_force.queues_yaml}});
      }));
  server.Get("/v1/policy",
             Route(api, [&](const httplib::Request&, httplib::Response& res, const Caller&) {
               const RulesText in_force = plane.InForce();
               Reply(res, 200,
                     {{"name", in_force.policy_name},
                      {"from", in_force.policy_from},
                      {"yaml", in_force.policy_yaml}});
             }));
  server.Get("/v1/nodes",
             Route(api, [&](const httplib::Request&, httplib::Response& res, const Caller&) {
               Json nodes = Json::array();
               for (const ControlPlane::NodeStatus& status : plane.Nodes()) {
                 const Node& node = status.node;
                 const ControlPlane::AgentStatus& agent = status.agent;
                 nodes.push_back({{"name", node.name},
                                  {"rack", node.rack},
                                  {"agent", agent.lost          ? "lost"
                                            : agent.unhealthy   ? "unhealthy"
                                            : !agent.registered ? "none"
                                                                : "ready"},
                                  {"engineError", agent.engine_error},
                                  {"simulated", agent.simulated},
                                  {"heartbeatAgeSeconds", agent.heartbeat_age_s},
                                  {"topologyMismatch", agent.topology_mismatch},
                                  {"containersOffGpus", agent.off_gpus},
                                  {"images", agent.images},
                                  {"imageBytes", agent.image_bytes},
                                  {"gpus", node.gpus.size()},
                                  {"freeGpus", status.free_gpus},
                                  {"cordoned", status.cordoned},
                                  {"gpuMap", status.gpu_map},
                                  {"model", node.gpus.empty() ? "" : node.gpus[0].model}});
               }
               Reply(res, 200, {{"nodes", nodes}});
             }));
  server.Get("/v1/events", Route(api, [&](const httplib::Request& req, httplib::Response& res,
                                          const Caller& caller) {
               const EventsQuery query = EventsParams(req);
               const EventPage first =
                   plane.EventsAfter(query.since, query.watch ? 1 : query.limit, caller, 0);
               RefuseCursorPastNewest(query.since, first);
               if (query.watch) {
                 // Each watch holds a worker while it lasts: bounded, so that watchers cannot
                 // take every worker from the other requests.
                 watches.Take(caller.user);
                 StreamEvents(server, plane, caller, query.since, watches, res);
                 return;
               }
               Reply(res, 200, PageJson(first));
             }));
  server.Post(R"(/v1/nodes/([^/]+)/([^/]+))",
              Route(
                  api,
                  [&](const httplib::Request& req, httplib::Response& res, const Caller&) {
                    const std::string node = req.matches[1], action = req.matches[2];
                    plane.NodeAction(node, action);
                    Reply(res, 200, {{"node", node}, {"action", action}});
                  },
                  AdminOnly("cordon, uncordon or drain a node")));
  server.Delete(R"(/v1/nodes/([^/]+))",
                Route(
                    api,
                    [&](const httplib::Request& req, httplib::Response& res, const Caller&) {
                      const std::string node = req.matches[1];
                      Reply(
                          res, 200,
                          {{"node", node}, {"removed", true}, {"reason", plane.RemoveNode(node)}});
                    },
                    AdminOnly("remove a node")));
  server.Put("/v1/policy",
             BodyRoute(
                 api,
                 [&](const httplib::Request&, httplib::Response& res, const Caller& caller,
                     const std::string& body) {
                   Reply(res, 200,
                         {{"applied", "policy"}, {"reason", plane.ApplyPolicy(body, caller.user)}});
                 },
                 AdminOnly("change the policy")));
  server.Put("/v1/queues",
             BodyRoute(
                 api,
                 [&](const httplib::Request&, httplib::Response& res, const Caller& caller,
                     const std::string& body) {
                   Reply(res, 200,
                         {{"applied", "queues"}, {"reason", plane.ApplyQueues(body, caller.user)}});
                 },
                 AdminOnly("change the queues")));
  server.Get(
      R"(/v1/jobs/(\d+)/logs)",
      Route(api, [&](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
        int64_t offset = 0;
        bool follow = false, frames = false;
        for (const auto& [key, value] : req.params) {
          if (key == "offset")
            offset = IntParam("offset", value, 0, INT64_MAX);
          else if (key == "follow")
            follow = IntParam("follow", value, 0, 1) == 1;
          else if (key == "frames")
            frames = IntParam("frames", value, 0, 1) == 1;
          else
            throw ApiError(400, "unknown parameter \"" + key.substr(0, 40) +
                                    "\"; known: offset, follow, frames");
        }
        const int64_t id = VisibleJob(plane, caller, JobId(req)).id;
        if (follow) {
          watches.Take(caller.user);
          StreamLogs(server, plane, id, offset, frames, caller, watches, ReaderGone(api, req), res);
          return;
        }
        int64_t next = offset;
        StderrSpans stderr_spans;
        std::string text =
            plane.Logs(id, offset, 4 << 20, 0, &next, frames ? &stderr_spans : nullptr);
        if (frames) text = MultiplexedFrames(text, stderr_spans);
        res.set_header("Berth-Next-Offset", std::to_string(next));
        res.set_content(std::move(text), LogContentType(frames));
      }));
  // The agent API (protocol/agent_protocol.h).
  server.Post(R"(/v1/agents/([^/]+)/register)",
              BodyRoute(
                  api,
                  [&](const httplib::Request& req, httplib::Response& res, const Caller&,
                      const std::string& body) {
                    const NodeRegistration registration = Message(body, ParseRegistration);
                    const uint64_t version = plane.RegisterAgent(req.matches[1], registration);
                    Reply(res, 200,
                          {{"version", version},
                           {"replaceableAfterMs",
                            std::llround(plane.ReplaceableAfterS(registration) * 1000)},
                           {"binaryLogs", true},
                           {"interruptedState", true}});
                  },
                  kAgents));
  server.Get(R"(/v1/agents/([^/]+)/assignments)",
             Route(
                 api,
                 [&](const httplib::Request& req, httplib::Response& res, const Caller&) {
                   uint64_t since = 0;
                   double wait = 0;
                   std::string instance;
                   for (const auto& [key, value] : req.params) {
                     if (key == "since")
                       since = static_cast<uint64_t>(IntParam("since", value, 0, INT64_MAX));
                     else if (key == "wait")
                       wait = static_cast<double>(IntParam("wait", value, 0, kMaxAssignmentWaitS));
                     else if (key == "instance")
                       instance = value;
                     else
                       throw ApiError(400, "unknown parameter \"" + key.substr(0, 40) +
                                               "\"; known: since, wait, instance");
                   }
                   // One waiting watch a node (its agent's); more would hold workers the others
                   // need.
                   if (++api.assignment_watches > api.max_assignment_watches) wait = 0;
                   try {
                     Reply(res, 200,
                           ToJson(plane.Assignments(req.matches[1], since, wait, instance)));
                   } catch (...) {
                     --api.assignment_watches;
                     throw;
                   }
                   --api.assignment_watches;
                 },
                 kAgents));
  server.Post(R"(/v1/agents/([^/]+)/report)",
              BodyRoute(
                  api,
                  [&](const httplib::Request& req, httplib::Response& res, const Caller&,
                      const std::string& body) {
                    Reply(res, 200,
                          ToJson(plane.Report(req.matches[1], Message(body, ParseReport))));
                  },
                  kAgents));
  server.Get("/v1/cells", Route(api, [&](const httplib::Request&, httplib::Response& res,
                                         const Caller&) { Reply(res, 200, plane.Cells()); }));
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [&](const httplib::Request&, httplib::Response& res) {
    if (plane.broken()) {
      res.status = 503;
      res.set_content("the state store failed\n", "text/plain");
      return;
    }
    res.set_content("ready\n", "text/plain");
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route's own error
    if (res.status == 404)
      Reply(res, 404,
            {{"error",
              "no route " + req.method + " " + req.path.substr(0, 80) + "; see docs/api.md"}});
    else if (res.status == 413)
      Reply(res, 413,
            {{"error", "the request body is over the limit of " + std::to_string(kMaxRequestBytes) +
                           " bytes"}});
    else if (res.status == 400)
      Reply(res, 400,
            {{"error", "the request could not be read: a malformed request line or header"}});
    else if (res.status == 414)
      Reply(res, 414, {{"error", "the request's path is too long"}});
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Reply(res, 500, {{"error", "internal error: " + what}});
      });
}

}  // namespace berth

// Metrics (docs/api.md, "Metrics").
namespace berth {
namespace {

// When the request this thread serves started (the pre-routing handler); consumed by the
// logger. A worker serves one request at a time.
thread_local std::optional<std::chrono::steady_clock::time_point> t_request_start;

constexpr const char* kRequestSeconds = "berth_api_request_duration_seconds";

}  // namespace

std::string RouteLabel(const std::string& path) {
  // Every route of AddApiRoutes, as the server matches it, with its label. A route missing
  // here is labelled "other".
  static const std::vector<std::pair<std::regex, std::string>> routes = [] {
    std::vector<std::pair<std::regex, std::string>> out;
    for (const auto& [pattern, label] : std::vector<std::pair<const char*, const char*>>{
             {"/v1/jobs", "/v1/jobs"},
             {R"(/v1/jobs/\d+)", "/v1/jobs/{id}"},
             {R"(/v1/jobs/\d+/stop)", "/v1/jobs/{id}/stop"},
             {R"(/v1/jobs/\d+/events)", "/v1/jobs/{id}/events"},
             {R"(/v1/jobs/\d+/logs)", "/v1/jobs/{id}/logs"},
             {"/v1/agents/[^/]+/register", "/v1/agents/{node}/register"},
             {"/v1/agents/[^/]+/assignments", "/v1/agents/{node}/assignments"},
             {"/v1/agents/[^/]+/report", "/v1/agents/{node}/report"},
             {"/v1/queues", "/v1/queues"},
             {"/v1/nodes", "/v1/nodes"},
             {"/v1/nodes/[^/]+/[^/]+", "/v1/nodes/{name}/{action}"},
             {"/v1/events", "/v1/events"},
             {"/v1/policy", "/v1/policy"},
             {"/v1/cells", "/v1/cells"},
             {"/healthz", "/healthz"},
             {"/readyz", "/readyz"},
             {"/metrics", "/metrics"}})
      out.emplace_back(std::regex(pattern), label);
    return out;
  }();
  if (path.size() <= 256)  // no route is longer; a long path is not worth matching
    for (const auto& [pattern, label] : routes)
      if (std::regex_match(path, pattern)) return label;
  return "other";
}

void DeclareRequestMetrics(MetricsRegistry& requests) {
  requests.DeclareHistogram(
      kRequestSeconds,
      "Time from routing an API request to its answer written, by route pattern, method and "
      "status code.",
      {"route", "method", "code"},
      {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
       10});
}

void NoteRequestStart() { t_request_start = std::chrono::steady_clock::now(); }

void RecordRequest(MetricsRegistry& requests, const httplib::Request& req,
                   const httplib::Response& res) {
  // A request the library answers before routing it (a malformed request line, a Content-Length
  // over the limit) has no start: it counts with 0 s.
  double seconds = 0;
  if (t_request_start)
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - *t_request_start).count();
  t_request_start.reset();
  std::string method = "other";
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
    if (req.method == known) method = known;
  requests.Observe(kRequestSeconds, {RouteLabel(req.path), method, std::to_string(res.status)},
                   seconds);
}

std::string MetricsExposition(const ControlPlane& plane, const MetricsRegistry& requests) {
  const ControlPlane::MetricsSnapshot m = plane.Metrics();
  MetricsRegistry out;
  out.DeclareGauge("berth_jobs", "Jobs the server knows, by state.", {"state"});
  for (const auto& [state, count] : m.jobs) out.Set("berth_jobs", {state}, count);
  // What the jobs in memory cost (`berth bench api` reads it per 100,000 jobs).
  if (const int64_t resident = ResidentBytes(); resident >= 0) {
    out.DeclareGauge("berth_process_resident_memory_bytes",
                     "The server process's resident memory, from /proc/self/statm.", {});
    out.Set("berth_process_resident_memory_bytes", {}, static_cast<double>(resident));
  }

  const std::pair<const char*, const char*> queue_gauges[] = {
      {"berth_queue_guarantee_gpus", "GPUs guaranteed to the queue (its virtual cluster)."},
      {"berth_queue_fair_share_gpus", "The queue's weighted max-min fair share, in GPUs."},
      {"berth_queue_usage_gpus", "GPU-equivalents held by the queue's running and stopping jobs."},
      {"berth_queue_borrowed_gpus", "GPU-equivalents the queue holds above its guarantee."},
      {"berth_queue_pending_gpus", "GPU-equivalents the queue's pending jobs ask for."}};
  for (const auto& [name, help] : queue_gauges) out.DeclareGauge(name, help, {"queue"});
  for (const QueueStatus& q : m.queues) {
    out.Set("berth_queue_guarantee_gpus", {q.name}, q.guarantee_gpus);
    out.Set("berth_queue_fair_share_gpus", {q.name}, q.fair_share_gpus);
    out.Set("berth_queue_usage_gpus", {q.name}, q.usage_gpus);
    out.Set("berth_queue_borrowed_gpus", {q.name}, q.borrowed_gpus);
    out.Set("berth_queue_pending_gpus", {q.name}, q.pending_gpus);
  }

  out.DeclareGauge("berth_gpus",
                   "GPUs by node, model and state: allocated (held by a placed job), bad, "
                   "cordoned or free; each GPU counts in one state.",
                   {"node", "model", "state"});
  for (const ControlPlane::GpuCount& g : m.gpus) {
    out.Set("berth_gpus", {g.node, g.model, "allocated"}, g.allocated);
    out.Set("berth_gpus", {g.node, g.model, "bad"}, g.bad);
    out.Set("berth_gpus", {g.node, g.model, "cordoned"}, g.cordoned);
    out.Set("berth_gpus", {g.node, g.model, "free"}, g.free);
  }
  out.DeclareGauge("berth_fragmentation_gpus",
                   "FGD fragmentation: free GPU capacity the jobs not ended, as typical pods, "
                   "could not use, in GPUs.");
  out.Set("berth_fragmentation_gpus", {}, m.fragmentation_gpus);

  out.DeclareHistogram("berth_scheduling_cycle_duration_seconds",
                       "Time the engine took for one scheduling cycle.", {},
                       m.cycle_seconds.bounds());
  out.SetHistogram("berth_scheduling_cycle_duration_seconds", {}, m.cycle_seconds);
  out.DeclareCounter("berth_scheduling_decisions_total", "Scheduling decisions applied, by kind.",
                     {"kind"});
  for (const auto& [kind, count] : m.decisions)
    out.Add("berth_scheduling_decisions_total", {kind}, static_cast<double>(count));
  out.DeclareCounter("berth_preemptions_total",
                     "Jobs sent back to pending by a preemption, eviction or kill.");
  out.Add("berth_preemptions_total", {}, static_cast<double>(m.preemptions));
  out.DeclareGauge(
      "berth_agent_heartbeat_age_seconds",
      "Seconds since the node's agent last reported, for nodes with an agent, or whose "
      "agent is expected (--expect-agents, jobs ran there, it joined) but has not "
      "registered since the server started: since then.",
      {"node"});
  for (const auto& [node, age] : m.heartbeat_ages)
    out.Set("berth_agent_heartbeat_age_seconds", {node}, age);
  out.DeclareGauge("berth_node_topology_mismatches",
                   "Differences between the node its agent found (sockets and their CPUs, the "
                   "GPUs' sockets, PCIe switches, NVLink domains, models, MIG mode) and the "
                   "cluster file's node; 0 when they agree or the agent declares its GPUs.",
                   {"node"});
  for (const auto& [node, count] : m.topology_mismatches)
    out.Set("berth_node_topology_mismatches", {node}, static_cast<double>(count));
  out.DeclareGauge("berth_node_containers_off_gpus",
                   "Containers on the node that run on CPUs away from their GPUs' NUMA node "
                   "(the engine refused to move them there), as its agent last reported.",
                   {"node"});
  for (const auto& [node, count] : m.off_gpus)
    out.Set("berth_node_containers_off_gpus", {node}, static_cast<double>(count));
  out.DeclareGauge("berth_node_container_engine_up",
                   "1 while the node's agent reaches its container engine (Docker), 0 while it "
                   "reports it cannot (after --node-unhealthy-after of that, the node takes no "
                   "new jobs).",
                   {"node"});
  for (const auto& [node, up] : m.engine_up)
    out.Set("berth_node_container_engine_up", {node}, up ? 1 : 0);
  out.DeclareHistogram(
      "berth_container_start_phase_seconds",
      "Time each phase of a job's cold start took, by phase: queued (pending to placed, on "
      "the server), then on its node pull (when the image was missing), create, start and "
      "firstLog (start to the first line the job printed).",
      {"phase"}, ControlPlane::StartPhaseBuckets());
  for (const auto& [phase, histogram] : m.start_phases)
    out.SetHistogram("berth_container_start_phase_seconds", {phase}, histogram);

  // What the hardware and the containers really do, as agents report it.
  const std::pair<const char*, const char*> gpu_gauges[] = {
      {"berth_gpu_memory_used_mib", "GPU memory in use (DCGM_FI_DEV_FB_USED), MiB."},
      {"berth_gpu_memory_free_mib", "GPU memory free (DCGM_FI_DEV_FB_FREE), MiB."},
      {"berth_gpu_utilization_percent", "GPU utilization (DCGM_FI_DEV_GPU_UTIL), percent."},
      {"berth_gpu_sm_active_ratio", "Share of cycles an SM had a warp (DCGM_FI_PROF_SM_ACTIVE)."},
      {"berth_gpu_last_xid", "The GPU's last XID error (DCGM_FI_DEV_XID_ERRORS), 0 for none."}};
  for (const auto& [name, help] : gpu_gauges) out.DeclareGauge(name, help, {"node", "gpu"});
  out.DeclareCounter(
      "berth_gpu_nvlink_bandwidth_total",
      "NVLink bandwidth counters over all lanes (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL).",
      {"node", "gpu"});
  out.DeclareGauge("berth_gpu_pcie_transmit_bytes_per_second",
                   "Bytes per second the GPU sends over PCIe, headers included "
                   "(DCGM_FI_PROF_PCIE_TX_BYTES, a rate).",
                   {"node", "gpu"});
  out.DeclareGauge("berth_gpu_pcie_receive_bytes_per_second",
                   "Bytes per second the GPU receives over PCIe, headers included "
                   "(DCGM_FI_PROF_PCIE_RX_BYTES).",
                   {"node", "gpu"});
  for (const auto& [node, gpus] : m.gpu_telemetry)
    for (const GpuReport& g : gpus) {
      const std::vector<std::string> labels = {node, std::to_string(g.gpu)};
      const std::pair<const char*, double> values[] = {
          {"berth_gpu_memory_used_mib", g.fb_used_mib},
          {"berth_gpu_memory_free_mib", g.fb_free_mib},
          {"berth_gpu_utilization_percent", g.util_percent},
          {"berth_gpu_sm_active_ratio", g.sm_active},
          {"berth_gpu_last_xid", g.xid},
          {"berth_gpu_pcie_transmit_bytes_per_second", g.pcie_tx_bytes},
          {"berth_gpu_pcie_receive_bytes_per_second", g.pcie_rx_bytes}};
      for (const auto& [name, value] : values)
        if (value >= 0) out.Set(name, labels, value);  // an unreported field is no sample
      // `out` is made anew each scrape: adding DCGM's reading to 0 exposes it.
      if (g.nvlink_total >= 0) out.Add("berth_gpu_nvlink_bandwidth_total", labels, g.nvlink_total);
    }
  out.DeclareGauge("berth_container_cpu_quota_percent",
                   "A running replica's CPU use in percent of its quota (of the node's CPUs "
                   "without one), between its agent's last two samples.",
                   {"job", "replica"});
  out.DeclareGauge("berth_container_memory_limit_percent",
                   "A running replica's memory in percent of its limit (of the node's memory "
                   "without one).",
                   {"job", "replica"});
  out.DeclareGauge("berth_container_contention",
                   "A running replica's contention grade by resource: 1 low, 2 medium, 3 high "
                   "(CPU under 40/40-80/over 80% of quota; memory under 60/60-90/over 90% of "
                   "limit; IO latency under 5/5-50/over 50 ms).",
                   {"job", "replica", "resource"});
  out.DeclareCounter("berth_container_network_receive_bytes_total",
                     "Bytes a running replica received on its network namespace's interfaces "
                     "but lo, as its agent last read them.",
                     {"job", "replica"});
  out.DeclareCounter("berth_container_network_transmit_bytes_total",
                     "Bytes a running replica sent on its network namespace's interfaces but lo.",
                     {"job", "replica"});
  const std::pair<const char*, const char*> cgroup_counters[] = {
      {"berth_container_cpu_throttled_periods_total",
       "CPU periods in which a running replica's cgroup was throttled (cpu.stat nr_throttled)."},
      {"berth_container_cpu_throttled_seconds_total",
       "Seconds a running replica's cgroup was throttled (cpu.stat throttled time)."},
      {"berth_container_io_read_bytes_total", "Bytes a running replica's cgroup read from disks."},
      {"berth_container_io_write_bytes_total", "Bytes a running replica's cgroup wrote to disks."}};
  for (const auto& [name, help] : cgroup_counters)
    out.DeclareCounter(name, help, {"job", "replica"});
  out.DeclareGauge("berth_container_memory_bytes",
                   "Memory a running replica's cgroup uses (memory.current, v1 usage_in_bytes).",
                   {"job", "replica"});
  out.DeclareGauge("berth_container_memory_limit_bytes",
                   "A running replica's memory limit; no sample when it has none.",
                   {"job", "replica"});
  out.DeclareGauge("berth_container_pressure_percent",
                   "Share of the last 10 s in which some task of a running replica waited for "
                   "the resource (cgroup v2 pressure stall information, some avg10).",
                   {"job", "replica", "resource"});
  for (const auto& [job, replica, c] : m.containers) {
    const std::vector<std::string> labels = {std::to_string(job), std::to_string(replica)};
    // `out` is made anew each scrape: adding the agent's reading to 0 exposes it.
    const std::pair<const char*, double> counts[] = {
        {"berth_container_network_receive_bytes_total", c.net_rx_bytes},
        {"berth_container_network_transmit_bytes_total", c.net_tx_bytes},
        {"berth_container_cpu_throttled_periods_total", c.cpu_throttled_periods},
        {"berth_container_cpu_throttled_seconds_total", c.cpu_throttled_seconds},
        {"berth_container_io_read_bytes_total", c.io_read_bytes},
        {"berth_container_io_write_bytes_total", c.io_write_bytes}};
    for (const auto& [name, value] : counts)
      if (value >= 0) out.Add(name, labels, value);
    if (c.memory_bytes >= 0) out.Set("berth_container_memory_bytes", labels, c.memory_bytes);
    if (c.memory_limit_bytes >= 0)
      out.Set("berth_container_memory_limit_bytes", labels, c.memory_limit_bytes);
    for (const auto& [resource, pressure] :
         {std::pair{"cpu", c.cpu_pressure}, {"memory", c.memory_pressure}, {"io", c.io_pressure}})
      if (pressure >= 0)
        out.Set("berth_container_pressure_percent", {labels[0], labels[1], resource}, pressure);
    if (c.cpu_percent >= 0) out.Set("berth_container_cpu_quota_percent", labels, c.cpu_percent);
    if (c.memory_percent >= 0)
      out.Set("berth_container_memory_limit_percent", labels, c.memory_percent);
    for (const auto& [resource, grade] :
         {std::pair{"cpu", c.cpu_grade}, {"memory", c.memory_grade}, {"io", c.io_grade}}) {
      const int level = grade == "low" ? 1 : grade == "medium" ? 2 : grade == "high" ? 3 : 0;
      if (level > 0) out.Set("berth_container_contention", {labels[0], labels[1], resource}, level);
    }
  }
  return out.Expose() + requests.Expose();
}

}  // namespace berth
