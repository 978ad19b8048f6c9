#include "store/log_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

namespace berth {
namespace {

constexpr const char* kT1 = "2026-12-02T03:40:46.100000000Z";
constexpr const char* kT2 = "2026-12-02T03:40:46.200000000Z";
constexpr const char* kT3 = "2026-12-02T03:40:47.000000000Z";

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "berth_logs_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    logs_ = std::make_unique<LogStore>(dir_);
  }

  // A chunk as an agent in step with the store sends it: read on from the stored cursor.
  bool Send(int64_t job, int replica, const std::string& placement, const std::string& until,
            const std::string& text, const StderrSpans& stderr_spans = {}) {
    return logs_->Append(job, replica, placement, logs_->Cursor(job, replica, placement), until,
                         text, stderr_spans);
  }

  // The whole log of `job`.
  std::string All(int64_t job) const {
    int64_t next = 0;
    return logs_->Read(job, 0, LogStore::kMaxJobLogBytes + 4096, &next);
  }

  std::string dir_;
  std::unique_ptr<LogStore> logs_;
};

TEST_F(LogStoreTest, ChunksAppendInOrderAndReadPagesByOffset) {
  EXPECT_TRUE(std::filesystem::is_directory(dir_));
  EXPECT_EQ(All(1), "");  // nothing yet
  EXPECT_EQ(logs_->Cursor(1, 0, "p1"), "");
  Send(1, 0, "p1", kT1, "a1\n");
  Send(1, 1, "p1", kT1, "b1\n");  // another replica, same time: its own cursor
  Send(1, 0, "p1", kT2, "a2\n");
  Send(2, 0, "p9", kT1, "other job\n");
  EXPECT_EQ(All(1), "a1\nb1\na2\n");
  EXPECT_EQ(All(2), "other job\n");
  EXPECT_EQ(logs_->Cursor(1, 0, "p1"), kT2);
  EXPECT_EQ(logs_->Cursor(1, 1, "p1"), kT1);
  EXPECT_EQ(logs_->Cursor(1, 0, "p2"), "");

  int64_t next = -1;
  EXPECT_EQ(logs_->Read(1, 0, 4, &next), "a1\nb");
  EXPECT_EQ(next, 4);
  EXPECT_EQ(logs_->Read(1, next, 100, &next), "1\na2\n");
  EXPECT_EQ(next, 9);
  EXPECT_EQ(logs_->Read(1, next, 100, &next), "");  // at the end: the offset stays
  EXPECT_EQ(next, 9);
  EXPECT_EQ(logs_->Read(77, 5, 100, &next), "");  // no such log
  EXPECT_EQ(next, 5);
}

TEST_F(LogStoreTest, ResendsAndBadChunksAreDropped) {
  Send(1, 0, "p1", kT2, "two\n");
  Send(1, 0, "p1", kT2, "two\n");    // the same chunk again
  Send(1, 0, "p1", kT1, "older\n");  // before the cursor
  Send(1, 0, "p1", "", "no time\n");
  Send(1, 0, "", kT3, "no placement\n");
  Send(1, 0, "p 1", kT3, "a space would break the cursor file\n");
  Send(1, 0, "p\n1", kT3, "so would a newline\n");
  EXPECT_EQ(All(1), "two\n");
  EXPECT_EQ(logs_->Cursor(1, 0, "p1"), kT2);
  // A new placement of the same job starts its own cursor.
  Send(1, 0, "p2", kT1, "placed again\n");
  EXPECT_EQ(All(1), "two\nplaced again\n");
}

// An agent that never heard the answer to a report the store took reads on from where it last
// knew the store to be: its next chunk overlaps what is stored, and is refused rather than
// appended whole (which repeated the overlap); it then sends from the stored cursor. A store
// that lost a tail is sent it again the same way.
TEST_F(LogStoreTest, AChunkThatDoesNotStartAtTheCursorIsRefused) {
  EXPECT_TRUE(logs_->Append(1, 0, "p1", "", kT1, "one\n"));
  EXPECT_FALSE(logs_->Append(1, 0, "p1", "", kT2, "one\ntwo\n"));  // overlaps "one"
  EXPECT_EQ(All(1), "one\n");
  EXPECT_EQ(logs_->Cursor(1, 0, "p1"), kT1);
  EXPECT_TRUE(logs_->Append(1, 0, "p1", kT1, kT2, "two\n"));
  EXPECT_FALSE(logs_->Append(1, 0, "p1", kT1, kT3, "two\nthree\n"));
  EXPECT_FALSE(logs_->Append(1, 0, "p1", kT3, "2026-12-02T03:40:48.000000000Z", "after a gap\n"));
  EXPECT_EQ(All(1), "one\ntwo\n");
  EXPECT_EQ(logs_->Cursor(1, 0, "p1"), kT2);
  EXPECT_TRUE(logs_->Append(1, 0, "p1", kT2, kT3, "three\n"));
  EXPECT_EQ(All(1), "one\ntwo\nthree\n");
  // Refused before a restart, refused after it.
  logs_ = std::make_unique<LogStore>(dir_);
  EXPECT_FALSE(logs_->Append(1, 0, "p1", kT2, "2026-12-02T03:40:48.000000000Z", "three\n4\n"));
  EXPECT_EQ(All(1), "one\ntwo\nthree\n");
  // Another run has a cursor of its own: a first chunk from its start is taken.
  EXPECT_TRUE(logs_->Append(1, 1, "p1", "", kT1, "other\n"));
  EXPECT_EQ(All(1), "one\ntwo\nthree\nother\n");
}

// A crash between the two writes of an append (the text, then the cursor) leaves text its
// sender was never told was taken, and sends again from the cursor: a store that starts cuts
// it, so that the resend is not stored twice.
TEST_F(LogStoreTest, TextPastTheLastCursorWrittenIsCutAtAStart) {
  ASSERT_TRUE(logs_->Append(1, 0, "p1", "", kT1, "one\n"));
  std::ofstream(dir_ + "/1.log", std::ios::app) << "two\n";  // its cursor never written
  std::ofstream(dir_ + "/2.log") << "never taken\n";         // nor the first one's
  std::ofstream(dir_ + "/3.log") << "an older berth's\n";    // whose cursor has no length
  std::ofstream(dir_ + "/3.cursor") << "0 p1 " << kT1 << "\n";
  logs_ = std::make_unique<LogStore>(dir_);
  EXPECT_EQ(All(1), "one\n");
  EXPECT_EQ(All(2), "");
  EXPECT_EQ(All(3), "an older berth's\n");
  EXPECT_EQ(logs_->Cursor(3, 0, "p1"), kT1);
  EXPECT_TRUE(logs_->Append(1, 0, "p1", kT1, kT2, "two\n"));
  EXPECT_EQ(All(1), "one\ntwo\n");
  logs_ = std::make_unique<LogStore>(dir_);  // a clean restart cuts nothing
  EXPECT_EQ(All(1), "one\ntwo\n");
}

TEST_F(LogStoreTest, CursorsSurviveANewStoreOverTheDirectory) {
  Send(5, 0, "p1", kT1, "one\n");
  Send(5, 2, "p1", kT2, "two\n");
  logs_ = std::make_unique<LogStore>(dir_);  // a restart
  EXPECT_EQ(logs_->Cursor(5, 0, "p1"), kT1);
  EXPECT_EQ(logs_->Cursor(5, 2, "p1"), kT2);
  Send(5, 2, "p1", kT2, "two\n");  // an agent resends what it sent before
  Send(5, 0, "p1", kT1, "one\n");
  EXPECT_EQ(All(5), "one\ntwo\n");
  // A first append after the restart (no Cursor call) also sees the stored cursors.
  logs_ = std::make_unique<LogStore>(dir_);
  Send(5, 0, "p1", kT1, "one\n");
  Send(5, 0, "p1", kT3, "three\n");
  EXPECT_EQ(All(5), "one\ntwo\nthree\n");
  EXPECT_EQ(logs_->Cursor(5, 2, "p1"), kT2);  // the other replica's cursor kept in the file
  logs_ = std::make_unique<LogStore>(dir_);
  EXPECT_EQ(logs_->Cursor(5, 0, "p1"), kT3);
  EXPECT_EQ(logs_->Cursor(5, 2, "p1"), kT2);
}

// The text from `offset` with its stderr stretches in brackets: "out[err]out".
std::string Marked(const LogStore& logs, int64_t job, int64_t offset, size_t max) {
  int64_t next = 0;
  StderrSpans spans = {{0, 1}};  // cleared by the read
  const std::string text = logs.Read(job, offset, max, &next, &spans);
  std::string out;
  size_t at = 0;
  for (const auto& [from, to] : spans) {
    EXPECT_LE(at, from);
    EXPECT_LT(from, to);
    EXPECT_LE(to, text.size());
    out += text.substr(at, from - at) + "[" + text.substr(from, to - from) + "]";
    at = to;
  }
  return out + text.substr(std::min(at, text.size()));
}

TEST_F(LogStoreTest, WhatWasWrittenToStderrIsKeptAcrossChunksReadsAndRestarts) {
  Send(1, 0, "p1", kT1, "o1\ne1\n", {{3, 6}});
  Send(1, 1, "p1", kT1, "e2\ne3\no2\n", {{0, 3}, {3, 6}});  // goes on on stderr
  Send(1, 0, "p1", kT2, "o3\n");
  Send(2, 0, "p1", kT1, "other\n", {{0, 6}});
  Send(1, 0, "p1", kT3, "e4\n", {{0, 3}});  // ends on stderr
  EXPECT_EQ(Marked(*logs_, 1, 0, 1 << 20), "o1\n[e1\ne2\ne3\n]o2\no3\n[e4\n]");
  EXPECT_EQ(Marked(*logs_, 2, 0, 1 << 20), "[other\n]");
  // Pages start and end anywhere, inside a stretch or at its edge.
  EXPECT_EQ(Marked(*logs_, 1, 4, 5), "[1\ne2\n]");
  EXPECT_EQ(Marked(*logs_, 1, 3, 9), "[e1\ne2\ne3\n]");
  EXPECT_EQ(Marked(*logs_, 1, 10, 3), "[3\n]o");
  EXPECT_EQ(Marked(*logs_, 1, 12, 4), "o2\no");
  EXPECT_EQ(Marked(*logs_, 1, 18, 9), "[e4\n]");
  EXPECT_EQ(Marked(*logs_, 1, 21, 9), "");
  // A resend adds nothing; a restart keeps it; the next chunk goes on from the last stream.
  Send(1, 0, "p1", kT3, "e4\n", {{0, 3}});
  logs_ = std::make_unique<LogStore>(dir_);
  Send(1, 1, "p1", kT3, "o4\n");
  EXPECT_EQ(Marked(*logs_, 1, 0, 1 << 20), "o1\n[e1\ne2\ne3\n]o2\no3\n[e4\n]o4\n");
  // Four switches, each once.
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/1.streams"), 4u * 8);
  logs_->Remove(1);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/1.streams"));
  Send(1, 0, "p1", kT1, "fresh\n");
  EXPECT_EQ(Marked(*logs_, 1, 0, 1 << 20), "fresh\n");
}

// A replica's unfinished line (the engine splits long lines; a run may die mid-line) is ended
// before another run's text, which keeps its stderr marks; the same run goes on where it was.
TEST_F(LogStoreTest, ReplicasLinesNeverRunTogether) {
  Send(1, 0, "p1", kT1, "progress 10%");
  Send(1, 0, "p1", kT2, " 20%");  // the same run: the same line
  Send(1, 1, "p1", kT1, "err\nout\n", {{0, 4}});
  Send(1, 0, "p1", kT3, " done\n");
  Send(1, 0, "p2", kT1, "half");     // a new run of replica 0, after a whole line
  Send(1, 0, "p3", kT1, "again\n");  // the run after it died mid-line
  EXPECT_EQ(Marked(*logs_, 1, 0, 1 << 20), "progress 10% 20%\n[err\n]out\n done\nhalf\nagain\n");
  logs_->Remove(1);
  Send(1, 1, "p1", kT1, "fresh");
  EXPECT_EQ(All(1), "fresh");
}

TEST_F(LogStoreTest, SwitchesOfTextNeverWrittenAreDropped) {
  Send(1, 0, "p1", kT1, "o1\n");
  // As a crash between the two writes leaves them: switches past the log's end, and half of one.
  {
    std::ofstream streams(dir_ + "/1.streams", std::ios::binary | std::ios::app);
    const char past_end[8 + 8 + 3] = {3, 0, 0, 0, 0, 0, 0, 0, 9};
    streams.write(past_end, sizeof past_end);
  }
  logs_ = std::make_unique<LogStore>(dir_);
  Send(1, 0, "p1", kT2, "o2\ne1\n", {{3, 6}});
  EXPECT_EQ(Marked(*logs_, 1, 0, 1 << 20), "o1\no2\n[e1\n]");
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/1.streams"), 8u);
}

TEST_F(LogStoreTest, RemoveDeletesTheLogAndItsCursors) {
  Send(3, 0, "p1", kT2, "gone\n");
  Send(4, 0, "p1", kT2, "kept\n");
  logs_->Remove(3);
  EXPECT_EQ(All(3), "");
  EXPECT_EQ(logs_->Cursor(3, 0, "p1"), "");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/3.log"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/3.cursor"));
  EXPECT_EQ(All(4), "kept\n");
  EXPECT_EQ(logs_->Cursor(4, 0, "p1"), kT2);
  // Not back after a restart either, and a job id used again starts afresh.
  logs_ = std::make_unique<LogStore>(dir_);
  EXPECT_EQ(logs_->Cursor(3, 0, "p1"), "");
  Send(3, 0, "p1", kT1, "new\n");
  EXPECT_EQ(All(3), "new\n");
}

TEST_F(LogStoreTest, WaitPastReturnsWhenTheLogGrowsOrAfterTheWait) {
  Send(1, 0, "p1", kT1, "12345");
  auto started = std::chrono::steady_clock::now();
  logs_->WaitPast(1, 2, 10);  // already longer: at once
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  started = std::chrono::steady_clock::now();
  logs_->WaitPast(1, 5, 0.2);  // nothing new: after the wait
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  EXPECT_LT(waited, std::chrono::seconds(5));
  started = std::chrono::steady_clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Send(1, 0, "p1", kT2, "6");
  });
  logs_->WaitPast(1, 5, 30);  // woken by the append, long before the wait
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  writer.join();
  EXPECT_EQ(All(1), "123456");
}

TEST_F(LogStoreTest, AJobsLogStopsGrowingAtItsBoundWithALastLineSayingSo) {
  const int64_t kMax = LogStore::kMaxJobLogBytes;
  Send(1, 0, "p1", "2026-01-01T00:00:01.000000000Z", std::string(kMax - 100, 'x'));
  Send(1, 0, "p1", "2026-01-01T00:00:02.000000000Z", "fits\n");
  Send(1, 0, "p1", "2026-01-01T00:00:03.000000000Z", std::string(200, 'y'), {{3, 10}, {150, 190}});
  Send(1, 0, "p1", "2026-01-01T00:00:04.000000000Z", "later\n");
  Send(1, 0, "p1", "2026-01-01T00:00:05.000000000Z", std::string(300, 'z'));
  const std::string all = All(1);
  ASSERT_GT(all.size(), static_cast<size_t>(kMax - 100));
  EXPECT_EQ(all.find_first_not_of('x'), static_cast<size_t>(kMax - 100));
  // What fits of the chunk that reaches the bound is kept, then the last line; nothing after.
  EXPECT_EQ(all.substr(kMax - 100), "fits\n" + std::string(95, 'y') +
                                        "\n[berth: this job's log reached 64 MiB; later output "
                                        "is not kept]\n");
  // Its stderr stretches only as far as the cut; the last line on stderr.
  EXPECT_EQ(Marked(*logs_, 1, kMax - 100, 1 << 20),
            "fits\nyyy[yyyyyyy]" + std::string(85, 'y') +
                "[\n[berth: this job's log reached 64 MiB; later output is not kept]\n]");
  // The cursor moved on all the same: what was dropped is not sent again.
  EXPECT_EQ(logs_->Cursor(1, 0, "p1"), "2026-01-01T00:00:05.000000000Z");
}

}  // namespace
}  // namespace berth
