// A job as GET /v1/jobs lists it, in its two forms, and the reading of the second:
// - JSON (the default): one object per job, written straight to text (a page of 10,000 jobs
//   built as JSON values first costs more in allocation than everything else the listing does);
// - tab-separated lines (Accept: text/tab-separated-values): what `berth ps` reads, since
//   100,000 jobs as JSON cost a client more to parse than everything else it does (kubectl asks
//   the API server for a Table for the same reason).
//
// The tab-separated form: a first line naming the columns (kJobListingHeader), then a line per
// job of kJobColumnCount cells separated by tabs. A cell's tab, newline, carriage return and
// backslash are written \t, \n, \r and \\ (PostgreSQL's text format), so a job is always one
// line. The gpus cell lists the job's GPU ids ("node/index") separated by commas, a comma
// within an id written \,.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "store/state_store.h"

namespace berth {

// The job's listed fields as a JSON object, appended to `out`; `reason` in place of the job's
// own (a listing shows why a pending job waits now).
void AppendJobJson(const StoredJob& job, const std::string& reason, std::string* out);
inline void AppendJobJson(const StoredJob& job, std::string* out) {
  AppendJobJson(job, job.reason, out);
}

enum JobColumn {
  kId,
  kName,
  kQueue,
  kUser,
  kState,
  kReason,
  kExitCode,
  kSubmitted,
  kUpdated,
  kGpus
};
constexpr int kJobColumnCount = kGpus + 1;
extern const char* const kJobListingHeader;  // the column names, tab-separated, with the newline

// The job's listed fields as a tab-separated line, its newline included, appended to `out`;
// `reason` as for AppendJobJson.
void AppendJobLine(const StoredJob& job, const std::string& reason, std::string* out);
inline void AppendJobLine(const StoredJob& job, std::string* out) {
  AppendJobLine(job, job.reason, out);
}

// The cells of a job's line (without its newline), still escaped; false when the line does not
// have kJobColumnCount of them.
bool SplitJobLine(std::string_view line, std::vector<std::string_view>* cells);

// A cell's text, unescaped.
std::string UnescapedCell(std::string_view cell);

// The GPU ids of a gpus cell.
std::vector<std::string> GpuIdsCell(std::string_view cell);

}  // namespace berth
