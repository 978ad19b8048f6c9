#include "sim/markup.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(MarkupTest, EscapesTheFiveMarkupCharacters) {
  EXPECT_EQ(EscapeMarkup("<a href=\"x\" title='y'>&</a>"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
}

TEST(MarkupTest, LeavesOtherTextAlone) {
  EXPECT_EQ(EscapeMarkup("queue-1 (ä, 50%)"), "queue-1 (ä, 50%)");
  EXPECT_EQ(EscapeMarkup(""), "");
}

}  // namespace
}  // namespace berth
