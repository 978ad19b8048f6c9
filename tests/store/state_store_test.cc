#include "store/state_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace berth {
namespace {

// A fresh state directory under the test temp directory.
std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "berth_store_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

StoredJob Job(int64_t id, const std::string& state) {
  StoredJob j;
  j.id = id;
  j.name = "job-" + std::to_string(id);
  j.queue = "default";
  j.user = "u";
  j.spec = "{\"gpus\": 1}";
  j.state = state;
  j.reason = "because";
  j.submitted = 100;
  j.updated = 100 + id;
  return j;
}

void Put(StateStore& store, const StoredJob& job) {
  store.Wait(store.Enqueue({StoreWrite::Put(job)}));
}

TEST(StateStoreTest, JobsAndTransitionsSurviveAReopen) {
  const std::string dir = FreshDir("reopen");
  {
    StateStore store(dir);
    Put(store, Job(1, "pending"));
    StoredJob placed = Job(1, "scheduled");
    placed.placements = "{\"gpuIds\": [\"n/0\"]}";
    Put(store, placed);
    Put(store, Job(2, "pending"));
  }
  StateStore store(dir);
  const std::vector<StoredJob> jobs = store.LoadJobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id, 1);
  EXPECT_EQ(jobs[0].state, "scheduled");
  EXPECT_EQ(jobs[0].placements, "{\"gpuIds\": [\"n/0\"]}");
  EXPECT_EQ(jobs[0].spec, "{\"gpus\": 1}");
  const std::vector<StoredEvent> t = store.JobEvents(1, 0, 1000).events;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].seq, 1);
  EXPECT_EQ(t[0].state, "pending");
  EXPECT_EQ(t[1].seq, 2);
  EXPECT_EQ(t[1].state, "scheduled");
}

TEST(StateStoreTest, DeleteForgetsTheJobAndItsTransitionsButNotItsId) {
  const std::string dir = FreshDir("delete");
  {
    StateStore store(dir);
    EXPECT_EQ(store.NextJobId(), 1);
    Put(store, Job(1, "pending"));
    Put(store, Job(1, "stopped"));
    store.Wait(store.Enqueue({StoreWrite::Delete(Job(1, "stopped"))}));
    EXPECT_TRUE(store.LoadJobs().empty());
    EXPECT_TRUE(store.JobEvents(1, 0, 1000).events.empty());
  }
  EXPECT_EQ(StateStore(dir).NextJobId(), 2);  // a removed job's id is not given again
}

// Two servers on one state would overwrite each other's jobs and hand out the same GPUs.
TEST(StateStoreTest, OneStoreAtATimePerDirectory) {
  const std::string dir = FreshDir("lock");
  auto first = std::make_unique<StateStore>(dir);
  try {
    StateStore second(dir);
    FAIL() << "a second store opened the same state";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("another berth server uses this state"), std::string::npos)
        << e.what();
  }
  first.reset();
  EXPECT_NO_THROW(StateStore again(dir));  // the lock goes with the store
}

// Group commit: many writers at once, each acknowledged only when its write is durable, and
// every write there exactly once.
TEST(StateStoreTest, ConcurrentWritersEachLandOnce) {
  const std::string dir = FreshDir("concurrent");
  constexpr int kThreads = 16, kEach = 40;
  {
    StateStore store(dir);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) Put(store, Job(1 + t * kEach + i, "pending"));
      });
    for (std::thread& t : threads) t.join();
  }
  StateStore store(dir);
  const std::vector<StoredJob> jobs = store.LoadJobs();
  ASSERT_EQ(jobs.size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(jobs[i].id, static_cast<int64_t>(i + 1));
    EXPECT_EQ(store.JobEvents(jobs[i].id, 0, 1000).events.size(), 1u);
  }
}

TEST(StateStoreTest, AStateFromANewerBerthIsRefused) {
  const std::string dir = FreshDir("newer");
  { StateStore store(dir); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/berth.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    StateStore store(dir);
    FAIL() << "a newer schema was opened";
  } catch (const StoreError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("written by a newer berth (schema version 99"), std::string::npos)
        << message;
    EXPECT_NE(message.find("give --state a new directory"), std::string::npos) << message;
  }
}

TEST(StateStoreTest, AStateWithANegativeSchemaVersionIsRefused) {
  for (const char* version : {"-1", "-5", "-2147483648"}) {
    const std::string dir = FreshDir(std::string("negative") + version);
    { StateStore store(dir); }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir + "/berth.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, (std::string("PRAGMA user_version=") + version).c_str(), nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    try {
      StateStore store(dir);
      FAIL() << "schema version " << version << " was opened";
    } catch (const StoreError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string("schema version ") + version + " is none berth ever"),
                std::string::npos)
          << message;
    }
  }
}

// A state written by the berth before the event log (schema 2: per-job transitions) opens
// with every transition in the log, in time order, and the jobs as they were.
TEST(StateStoreTest, ASchema2StateIsMigrated) {
  const std::string dir = FreshDir("schema2");
  std::filesystem::create_directories(dir);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/berth.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(
          db,
          "CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT NOT NULL, queue TEXT NOT NULL,"
          " user TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL,"
          " exit_code INTEGER NOT NULL, submitted REAL NOT NULL, updated REAL NOT NULL,"
          " placements TEXT NOT NULL);"
          "CREATE TABLE transitions (job INTEGER NOT NULL, seq INTEGER NOT NULL, at REAL NOT NULL,"
          " state TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (job, seq)) WITHOUT ROWID;"
          "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
          "INSERT INTO meta VALUES ('next_job_id', 3);"
          "INSERT INTO jobs VALUES (1, 'a', 'default', 'u', '{}', 'scheduled', 'r', 0, 10, 12, '');"
          "INSERT INTO jobs VALUES (2, 'b', 'default', 'u', '{}', 'pending', 'r', 0, 11, 11, '');"
          "INSERT INTO transitions VALUES (1, 1, 10, 'pending', 'submitted');"
          "INSERT INTO transitions VALUES (1, 2, 12, 'scheduled', 'placed');"
          "INSERT INTO transitions VALUES (2, 1, 11, 'pending', 'submitted');"
          "PRAGMA user_version=2;",
          nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  StateStore store(dir);
  EXPECT_EQ(store.LoadJobs().size(), 2u);
  EXPECT_EQ(store.NextJobId(), 3);
  const std::vector<StoredEvent> log = store.EventsAfter(0, 10, "", 0).events;
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].job, 1);
  EXPECT_EQ(log[1].job, 2);  // by time across jobs
  EXPECT_EQ(log[2].state, "scheduled");
  EXPECT_EQ(store.JobEvents(1, 0, 1000).events.size(), 2u);
}

TEST(StateStoreTest, TheEventLogIsOrderedFilteredAndNeverRenumbered) {
  const std::string dir = FreshDir("events");
  StateStore store(dir);
  StoredJob mine = Job(1, "pending");
  mine.user = "ann";
  Put(store, mine);
  Put(store, Job(2, "pending"));
  store.Wait(store.Enqueue({StoreWrite::Node({"n1", true}, "cordoned", 200, "on request")}));
  std::vector<StoredEvent> log = store.EventsAfter(0, 10, "", 0).events;
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2].node, "n1");
  EXPECT_EQ(log[2].job, 0);
  EXPECT_EQ(log[2].state, "cordoned");
  // ann sees her job and the node, not the other user's job.
  log = store.EventsAfter(0, 10, "ann", 0).events;
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].job, 1);
  EXPECT_EQ(log[1].node, "n1");
  EXPECT_EQ(store.EventsAfter(1, 1, "", 0).events.size(), 1u);  // the limit
  // ann's cursor moves past the events she may not see: her next read starts after them all,
  // so a watch of hers never scans the other users' events again.
  StoreWrite other = StoreWrite::Put(Job(2, "scheduled"));
  store.Wait(store.Enqueue({other}));
  const EventPage anns = store.EventsAfter(3, 10, "ann", 0);
  EXPECT_TRUE(anns.events.empty());
  EXPECT_EQ(anns.next, 4);
  // A job's events come in pages too.
  const EventPage first = store.JobEvents(2, 0, 1);
  ASSERT_EQ(first.events.size(), 1u);
  EXPECT_EQ(store.JobEvents(2, first.next, 10).events.size(), 1u);
  ASSERT_EQ(store.LoadNodes().size(), 1u);
  EXPECT_TRUE(store.LoadNodes()[0].cordoned);
  // A removed job's events go, but their numbers are not given again: a watcher that saw
  // them resumes after them and misses nothing new.
  const int64_t last = store.EventsAfter(0, 10, "", 0).events.back().seq;
  store.Wait(store.Enqueue({StoreWrite::Delete(Job(2, "stopped"))}));
  // The newest event is still the newest ever numbered, though its job and events are gone.
  EXPECT_EQ(store.EventsAfter(last, 10, "", 0).newest, last);
  Put(store, Job(3, "pending"));
  log = store.EventsAfter(last, 10, "", 0).events;
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].job, 3);
  EXPECT_GT(log[0].seq, last);
}

// A watch waits for the next commit instead of polling, and returns empty at its deadline.
// A setting is kept across a reopen, replaced by the next one of its key, and logged as an
// event of the server's own (job 0, no node) that every user sees.
TEST(StateStoreTest, SettingsAreKeptAndLogged) {
  const std::string dir = FreshDir("settings");
  {
    StateStore store(dir);
    EXPECT_TRUE(store.LoadSettings().empty());
    store.Wait(store.Enqueue(
        {StoreWrite::Setting({"policy", "name: a\n"}, "policy-applied", 10, "policy a applied"),
         StoreWrite::Setting({"policy", "name: b\n"}, "policy-applied", 11, "policy b applied")}));
  }
  StateStore store(dir);
  const std::vector<StoredSetting> settings = store.LoadSettings();
  ASSERT_EQ(settings.size(), 1u);
  EXPECT_EQ(settings[0].key, "policy");
  EXPECT_EQ(settings[0].value, "name: b\n");
  const std::vector<StoredEvent> log = store.EventsAfter(0, 10, "ann", 0).events;
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].job, 0);
  EXPECT_EQ(log[1].node, "");
  EXPECT_EQ(log[1].state, "policy-applied");
  EXPECT_EQ(log[1].reason, "policy b applied");
}

TEST(StateStoreTest, AWatchWakesOnTheNextCommit) {
  const std::string dir = FreshDir("watch");
  StateStore store(dir);
  EXPECT_TRUE(store.EventsAfter(0, 10, "", 0.05).events.empty());
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Put(store, Job(1, "pending"));
  });
  const std::vector<StoredEvent> log = store.EventsAfter(0, 10, "", 30).events;
  writer.join();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].job, 1);
}

TEST(StateStoreTest, AFileIsNotAStateDirectory) {
  const std::string file = ::testing::TempDir() + "berth_store_file";
  std::ofstream(file) << "x";
  EXPECT_THROW(StateStore store(file), StoreError);
}

}  // namespace
}  // namespace berth
