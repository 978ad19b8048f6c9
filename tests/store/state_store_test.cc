#include "store/state_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

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
  store.Wait(store.Enqueue({{StoreWrite::Kind::kPut, job}}));
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
  const std::vector<StoredTransition> t = store.Transitions(1);
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
    store.Wait(store.Enqueue({{StoreWrite::Kind::kDelete, Job(1, "stopped")}}));
    EXPECT_TRUE(store.LoadJobs().empty());
    EXPECT_TRUE(store.Transitions(1).empty());
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
    EXPECT_EQ(store.Transitions(jobs[i].id).size(), 1u);
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

TEST(StateStoreTest, AFileIsNotAStateDirectory) {
  const std::string file = ::testing::TempDir() + "berth_store_file";
  std::ofstream(file) << "x";
  EXPECT_THROW(StateStore store(file), StoreError);
}

}  // namespace
}  // namespace berth
