#include "store/state_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <system_error>
#include <utility>

namespace berth {
namespace {

// Each migration takes the schema from its index to the next version.
const char* const kMigrations[] = {
    // 0 -> 1: jobs and their transitions.
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY, name TEXT NOT NULL, queue TEXT NOT NULL, user TEXT NOT NULL,"
    "  spec TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL, exit_code INTEGER NOT NULL,"
    "  submitted REAL NOT NULL, updated REAL NOT NULL, placements TEXT NOT NULL);"
    "CREATE TABLE transitions ("
    "  job INTEGER NOT NULL, seq INTEGER NOT NULL, at REAL NOT NULL, state TEXT NOT NULL,"
    "  reason TEXT NOT NULL, PRIMARY KEY (job, seq)) WITHOUT ROWID;",
    // 1 -> 2: the high-water mark of job ids, so that a removed job's id is not given again.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta VALUES ('next_job_id', (SELECT COALESCE(MAX(id), 0) + 1 FROM jobs));",
    // 2 -> 3: one event log for jobs and nodes, numbered across the state (AUTOINCREMENT: a
    // removed job's numbers are not given again, so a watcher's resume point stays valid), and
    // the operators' marks on nodes.
    "CREATE TABLE events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, job INTEGER NOT NULL,"
    "  node TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL);"
    "INSERT INTO events (at, job, node, state, reason)"
    "  SELECT at, job, '', state, reason FROM transitions ORDER BY at, job, seq;"
    "DROP TABLE transitions;"
    "CREATE INDEX events_by_job ON events (job, seq);"
    "CREATE TABLE nodes (name TEXT PRIMARY KEY, cordoned INTEGER NOT NULL) WITHOUT ROWID;",
    // 3 -> 4: what admins applied through the API (the policy's and the queues' YAML).
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;",
    // 4 -> 5: whether the engine moved the job once (a job is moved at most once in its life).
    "ALTER TABLE jobs ADD COLUMN moved INTEGER NOT NULL DEFAULT 0;",
};
static_assert(std::size(kMigrations) == StateStore::kSchemaVersion);

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw StoreError(std::string("preparing a statement: ") + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, const std::string& text) {
    sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t value) {
    sqlite3_bind_int64(stmt_, i, value);
    return *this;
  }
  Statement& Bind(int i, double value) {
    sqlite3_bind_double(stmt_, i, value);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string Text(int column) const {
    const auto* text = sqlite3_column_text(stmt_, column);
    return text == nullptr ? ""
                           : std::string(reinterpret_cast<const char*>(text),
                                         sqlite3_column_bytes(stmt_, column));
  }
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Real(int column) const { return sqlite3_column_double(stmt_, column); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

void Exec(sqlite3* db, const std::string& sql, const std::string& what) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : sqlite3_errmsg(db);
    sqlite3_free(error);
    throw StoreError(what + ": " + message);
  }
}

sqlite3* OpenDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    throw StoreError(path + ": cannot open the state database: " + message);
  }
  // Another berth on the same state (a second server) waits a little, then gets an error.
  sqlite3_busy_timeout(db, 5000);
  return db;
}

}  // namespace

StateStore::StateStore(const std::string& dir) : path_(dir + "/berth.db") {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw StoreError(dir + ": cannot create the state directory: " + error.message() +
                     "; give --state a directory you may write");
  if (!std::filesystem::is_directory(dir, error))
    throw StoreError(dir + ": not a directory; give --state a directory");
  const std::string lock = dir + "/lock";
  lock_fd_ = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0)
    throw StoreError(lock + ": cannot open: " + std::strerror(errno) +
                     "; give --state a directory you may write");
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd_);
    throw StoreError(dir +
                     ": another berth server uses this state; stop it, or give --state "
                     "another directory");
  }
  try {
    writer_ = OpenDatabase(path_);
    // WAL: readers (the API) never wait for the writer, and a commit is one append.
    Exec(writer_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", path_);
    {
      Statement check(writer_, "PRAGMA quick_check");
      if (check.Step() != SQLITE_ROW || check.Text(0) != "ok")
        throw StoreError(path_ + ": the state database is damaged (" +
                         check.Text(0).substr(0, 200) +
                         "); restore it from a backup, or give --state a new directory");
    }
    Migrate();
    // A database that opens but cannot be written would fail every request later.
    Exec(writer_,
         "BEGIN IMMEDIATE; UPDATE meta SET value = value WHERE key = 'next_job_id'; COMMIT;",
         path_ + ": the state database cannot be written (check its permissions and the disk)");
    reader_ = OpenDatabase(path_);
  } catch (...) {
    sqlite3_close(writer_);
    close(lock_fd_);
    throw;
  }
  writer_thread_ = std::thread([this] { WriterLoop(); });
}

StateStore::~StateStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_writer_.notify_one();
  committed_cv_.notify_all();  // watchers in EventsAfter
  writer_thread_.join();
  sqlite3_close(reader_);
  sqlite3_close(writer_);
  close(lock_fd_);  // releases the lock
}

void StateStore::Migrate() {
  int64_t found = 0;
  {
    // Finalized before migrating, as every statement: an open one keeps tables from being
    // dropped.
    Statement version(writer_, "PRAGMA user_version");
    if (version.Step() != SQLITE_ROW) throw StoreError(path_ + ": cannot read the schema version");
    found = version.Int(0);
  }
  if (found > kSchemaVersion)
    throw StoreError(path_ + ": the state was written by a newer berth (schema version " +
                     std::to_string(found) + "; this berth reads up to " +
                     std::to_string(kSchemaVersion) +
                     "); run that berth, or give --state a new directory");
  if (found < 0)
    throw StoreError(path_ + ": the state's schema version " + std::to_string(found) +
                     " is none berth ever wrote; the file was changed by something else: give "
                     "--state a new directory, or restore the state from a backup");
  for (int64_t v = found; v < kSchemaVersion; ++v)
    Exec(writer_,
         std::string("BEGIN; ") + kMigrations[v] + " PRAGMA user_version=" + std::to_string(v + 1) +
             "; COMMIT;",
         path_ + ": migrating the schema to version " + std::to_string(v + 1));
}

uint64_t StateStore::Enqueue(std::vector<StoreWrite> writes) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (StoreWrite& w : writes) queued_.push_back(std::move(w));
    ticket = ++enqueued_;
  }
  wake_writer_.notify_one();
  return ticket;
}

void StateStore::Wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  committed_cv_.wait(lock, [&] { return committed_ >= ticket; });
  if (ticket >= first_failed_) throw StoreError(path_ + ": " + failure_);
}

uint64_t StateStore::Enqueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_;
}

void StateStore::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_writer_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (queued_.empty()) return;  // stopping, and everything is written
    std::vector<StoreWrite> batch = std::move(queued_);
    queued_.clear();
    const uint64_t last = enqueued_;
    const bool failed_before = !failure_.empty();
    lock.unlock();
    const std::string error = failed_before ? "" : WriteBatch(batch);
    lock.lock();
    if (!error.empty()) {
      failure_ = error;
      first_failed_ = committed_ + 1;
    }
    committed_ = last;
    committed_cv_.notify_all();
  }
}

std::string StateStore::WriteBatch(const std::vector<StoreWrite>& batch) {
  try {
    Exec(writer_, "BEGIN IMMEDIATE", "starting a commit");
    Statement put(writer_,
                  "INSERT OR REPLACE INTO jobs (id, name, queue, user, spec, state, reason, "
                  "exit_code, submitted, updated, placements, moved) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    Statement event(writer_,
                    "INSERT INTO events (at, job, node, state, reason) VALUES (?, ?, ?, ?, ?)");
    Statement remove(writer_, "DELETE FROM jobs WHERE id = ?");
    Statement mark(writer_, "UPDATE meta SET value = MAX(value, ?) WHERE key = 'next_job_id'");
    Statement remove_events(writer_, "DELETE FROM events WHERE job = ?");
    Statement put_node(writer_, "INSERT OR REPLACE INTO nodes (name, cordoned) VALUES (?, ?)");
    Statement put_setting(writer_, "INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)");
    Statement forget_node(writer_, "DELETE FROM nodes WHERE name = ?");
    Statement forget_setting(writer_, "DELETE FROM settings WHERE key = ?");
    const auto step = [&](Statement& s) {
      if (s.Step() != SQLITE_DONE) throw StoreError(sqlite3_errmsg(writer_));
      s.Reset();
    };
    for (const StoreWrite& w : batch) {
      const StoredJob& j = w.job;
      if (w.kind == StoreWrite::Kind::kDelete) {
        step(remove.Bind(1, j.id));
        step(remove_events.Bind(1, j.id));
        continue;
      }
      if (w.kind != StoreWrite::Kind::kPut) {
        if (w.kind == StoreWrite::Kind::kNode) {
          step(put_node.Bind(1, w.node.name).Bind(2, static_cast<int64_t>(w.node.cordoned)));
        } else if (w.kind == StoreWrite::Kind::kSetting) {
          step(put_setting.Bind(1, w.setting.key).Bind(2, w.setting.value));
        } else {
          step(forget_node.Bind(1, w.node.name));
          step(forget_setting.Bind(1, w.setting.key));
        }
        step(event.Bind(1, j.updated)
                 .Bind(2, int64_t{0})
                 .Bind(3, w.node.name)
                 .Bind(4, w.event)
                 .Bind(5, j.reason));
        continue;
      }
      step(put.Bind(1, j.id)
               .Bind(2, j.name)
               .Bind(3, j.queue)
               .Bind(4, j.user)
               .Bind(5, j.spec)
               .Bind(6, j.state)
               .Bind(7, j.reason)
               .Bind(8, static_cast<int64_t>(j.exit_code))
               .Bind(9, j.submitted)
               .Bind(10, j.updated)
               .Bind(11, j.placements)
               .Bind(12, static_cast<int64_t>(j.moved)));
      step(event.Bind(1, j.updated)
               .Bind(2, j.id)
               .Bind(3, std::string())
               .Bind(4, j.state)
               .Bind(5, j.reason));
      step(mark.Bind(1, j.id + 1));
    }
    Exec(writer_, "COMMIT", "committing");
    return "";
  } catch (const StoreError& e) {
    sqlite3_exec(writer_, "ROLLBACK", nullptr, nullptr, nullptr);
    return e.what();
  }
}

std::vector<StoredJob> StateStore::LoadJobs() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  Statement s(reader_,
              "SELECT id, name, queue, user, spec, state, reason, exit_code, submitted, updated, "
              "placements, moved FROM jobs ORDER BY id");
  std::vector<StoredJob> jobs;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    StoredJob j;
    j.id = s.Int(0);
    j.name = s.Text(1);
    j.queue = s.Text(2);
    j.user = s.Text(3);
    j.spec = s.Text(4);
    j.state = s.Text(5);
    j.reason = s.Text(6);
    j.exit_code = static_cast<int>(s.Int(7));
    j.submitted = s.Real(8);
    j.updated = s.Real(9);
    j.placements = s.Text(10);
    j.moved = s.Int(11) != 0;
    jobs.push_back(std::move(j));
  }
  if (rc != SQLITE_DONE) throw StoreError(path_ + ": reading jobs: " + sqlite3_errmsg(reader_));
  return jobs;
}

int64_t StateStore::NextJobId() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  Statement s(reader_, "SELECT value FROM meta WHERE key = 'next_job_id'");
  if (s.Step() != SQLITE_ROW) throw StoreError(path_ + ": the job id mark is missing");
  return s.Int(0);
}

namespace {

// Events from a statement that selects e.seq, e.at, e.job, e.node, e.state, e.reason.
std::vector<StoredEvent> ReadEvents(Statement& s, sqlite3* db, const std::string& path) {
  std::vector<StoredEvent> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW)
    out.push_back({s.Int(0), s.Real(1), s.Int(2), s.Text(3), s.Text(4), s.Text(5)});
  if (rc != SQLITE_DONE) throw StoreError(path + ": reading events: " + sqlite3_errmsg(db));
  return out;
}

}  // namespace

EventPage StateStore::JobEvents(int64_t job, int64_t seq, size_t limit) const {
  std::lock_guard<std::mutex> lock(read_mu_);
  Statement s(reader_,
              "SELECT e.seq, e.at, e.job, e.node, e.state, e.reason FROM events e "
              "WHERE e.job = ? AND e.seq > ? ORDER BY e.seq LIMIT ?");
  s.Bind(1, job).Bind(2, seq).Bind(3, static_cast<int64_t>(limit));
  EventPage page{ReadEvents(s, reader_, path_), seq, NewestEventSeq()};
  if (!page.events.empty()) page.next = page.events.back().seq;
  return page;
}

int64_t StateStore::NewestEventSeq() const {
  // The newest ever numbered (AUTOINCREMENT's mark), which a removed job's events leave behind
  // them: a cursor the log gave out is never past it.
  Statement s(reader_,
              "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)");
  if (s.Step() != SQLITE_ROW)
    throw StoreError(path_ + ": reading events: " + sqlite3_errmsg(reader_));
  return s.Int(0);
}

EventPage StateStore::EventsAfter(int64_t seq, size_t limit, const std::string& user,
                                  double wait_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  EventPage page{{}, seq};
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = committed_;
    }
    {
      std::lock_guard<std::mutex> lock(read_mu_);
      // The newest event first, then the page up to it: an event committed in between is
      // after `newest`, so moving the cursor to `newest` skips nothing a later call would see.
      const int64_t newest = NewestEventSeq();
      page.newest = newest;
      Statement s(reader_,
                  "SELECT e.seq, e.at, e.job, e.node, e.state, e.reason FROM events e "
                  "LEFT JOIN jobs j ON j.id = e.job WHERE e.seq > ?1 AND e.seq <= ?4 "
                  "AND (?2 = '' OR e.job = 0 OR j.user = ?2) ORDER BY e.seq LIMIT ?3");
      s.Bind(1, page.next).Bind(2, user).Bind(3, static_cast<int64_t>(limit)).Bind(4, newest);
      page.events = ReadEvents(s, reader_, path_);
      // A short page saw every event up to `newest`, the caller's or not: the cursor moves
      // past them all, so a user's watch never reads another user's events again.
      page.next =
          page.events.size() == limit ? page.events.back().seq : std::max(page.next, newest);
    }
    if (!page.events.empty() || std::chrono::steady_clock::now() >= deadline) return page;
    // Nothing yet: sleep until the writer commits again (or the deadline), then look again.
    std::unique_lock<std::mutex> lock(mu_);
    if (!committed_cv_.wait_until(lock, deadline,
                                  [&] { return committed_ != seen || stopping_; }) ||
        stopping_)
      return page;
  }
}

std::vector<StoredNode> StateStore::LoadNodes() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  Statement s(reader_, "SELECT name, cordoned FROM nodes ORDER BY name");
  std::vector<StoredNode> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), s.Int(1) != 0});
  if (rc != SQLITE_DONE) throw StoreError(path_ + ": reading nodes: " + sqlite3_errmsg(reader_));
  return out;
}

std::vector<StoredSetting> StateStore::LoadSettings() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  Statement s(reader_, "SELECT key, value FROM settings ORDER BY key");
  std::vector<StoredSetting> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), s.Text(1)});
  if (rc != SQLITE_DONE) throw StoreError(path_ + ": reading settings: " + sqlite3_errmsg(reader_));
  return out;
}

}  // namespace berth
