// Where berth finds the data sets it bundles (the repository's data/: the openb and Tiresias
// traces), so that defaults such as `sim packing`'s trace work from any current directory and
// need nothing outside the clone or the installed tree.
#pragma once

#include <string>
#include <vector>

namespace berth {

// The directories searched, in order: data/ beside the binary, data/ of the source tree it was
// built from (a clone), then the installed share/berth.
std::vector<std::string> DataDirs();

// `relative` (e.g. "openb/openb_pod_list_default.csv") in the first of DataDirs() that holds
// it; "" when none does.
std::string FindDataFile(const std::string& relative);

}  // namespace berth
