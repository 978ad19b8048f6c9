// The control plane's durable state: every job the server accepted and every state change it
// went through, in one SQLite database (WAL mode) under the state directory.
//
// Durability: Wait(Enqueue(writes)) returns once the writes are on disk (synchronous=FULL), so
// a server that acknowledges after it loses nothing it acknowledged to a kill -9. Writes of
// concurrent callers are committed together by one writer thread (group commit): one fsync
// serves every caller waiting at that moment, in the order Enqueue was called.
//
// Schema: versioned by PRAGMA user_version. An older database is migrated on open; a newer one
// (written by a later berth) is refused, since this version cannot know what it would break.
// A write that fails (disk full, I/O error) fails its batch and every later one: the server
// then refuses what it cannot record, rather than acknowledging it.
//
// Thread-safe: Enqueue, Wait and the readers may be called from any thread.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace berth {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One job as the server keeps it. `spec` is the job spec as submitted (JSON), `placements` the
// GPUs it was given (JSON, "" while it holds none).
struct StoredJob {
  int64_t id = 0;
  std::string name;
  std::string queue;
  std::string user;
  std::string spec;
  std::string state;  // the server's job states: pending, scheduled, ..., stopped, lost
  std::string reason;
  int exit_code = 0;
  double submitted = 0;  // seconds since the epoch
  double updated = 0;
  std::string placements;
};

// One state change of a job, as the events API lists them.
struct StoredTransition {
  int64_t job = 0;
  int64_t seq = 0;  // per job, from 1
  double at = 0;
  std::string state;
  std::string reason;
};

struct StoreWrite {
  enum class Kind {
    kPut,     // insert or replace the job, and append a transition to its state and reason
    kDelete,  // remove the job and its transitions
  };
  Kind kind = Kind::kPut;
  StoredJob job;
};

class StateStore {
 public:
  // The schema this berth writes.
  static constexpr int kSchemaVersion = 2;

  // Opens DIR/berth.db, creating DIR and the database when missing, and takes DIR/lock: one
  // server per state, since two would overwrite each other's jobs and hand out the same GPUs.
  // Checks that the database is intact and writable. Throws StoreError naming the path and
  // what to do.
  explicit StateStore(const std::string& dir);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Queues writes for the next commit; returns a ticket for Wait.
  uint64_t Enqueue(std::vector<StoreWrite> writes);
  // Returns once the ticket's writes are committed; throws StoreError when they failed.
  void Wait(uint64_t ticket);

  // Every job, by id (startup: the server rebuilds from these).
  std::vector<StoredJob> LoadJobs() const;
  // Above every id ever stored, removed jobs' included: ids are never given twice.
  int64_t NextJobId() const;
  // A job's transitions, oldest first.
  std::vector<StoredTransition> Transitions(int64_t job) const;
  const std::string& path() const { return path_; }

 private:
  void Migrate();
  void WriterLoop();
  std::string WriteBatch(const std::vector<StoreWrite>& batch);

  std::string path_;
  int lock_fd_ = -1;           // DIR/lock, held while the store is open
  sqlite3* writer_ = nullptr;  // used by the writer thread only (and Migrate, before it starts)
  sqlite3* reader_ = nullptr;  // guarded by read_mu_
  mutable std::mutex read_mu_;

  std::mutex mu_;
  std::condition_variable wake_writer_, committed_cv_;
  std::vector<StoreWrite> queued_;
  uint64_t enqueued_ = 0;   // tickets handed out
  uint64_t committed_ = 0;  // tickets whose writes are done (committed, or failed)
  std::string failure_;     // the first failed commit; every later ticket fails too
  uint64_t first_failed_ = UINT64_MAX;
  bool stopping_ = false;
  std::thread writer_thread_;
};

}  // namespace berth
