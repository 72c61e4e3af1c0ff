// Include directives that would read a file the cache key does not hash are found, however they
// are spelled; those the preprocessor never sees (comments) and relative names are not.
#include "kjit/templates/includes.hpp"

#include <gtest/gtest.h>

namespace kjit::templates {
namespace {

TEST(FindUnkeyedInclude, FindsAbsolutePathsInEveryDirectiveThatReadsAFile) {
  EXPECT_EQ(find_unkeyed_include("int a;\n#include \"/tmp/x/val.h\"\n"),
            "line 2: #include \"/tmp/x/val.h\" names an absolute path");
  for (const char *text :
       {"#include </usr/include/stdio.h>", "  #  include\t\"/x.h\"", "#include_next \"/x.h\"",
        "#import </x.h>", "#embed \"/x.bin\"", "#include\"/x.h\"", "#include</x.h>",
        "#if __has_include(\"/x.h\")\n#endif", "#elif defined(A) || __has_include( </x.h> )",
        "#if __has_include_next(\"/x.h\")", "#inc\\\nlude \"/x.h\"", "/* c */ # include \"/x.h\"",
        "# /* c */ include \"/x.h\""})
    EXPECT_NE(find_unkeyed_include(text), "") << text;
}

TEST(FindUnkeyedInclude, FindsComputedIncludes) {
  EXPECT_EQ(find_unkeyed_include("#define H \"/x.h\"\n#include H\n"),
            "line 2: #include H names its file through a macro, which kjit cannot check");
}

TEST(FindUnkeyedInclude, CountsLinesAcrossContinuationsAndComments) {
  EXPECT_EQ(find_unkeyed_include("a \\\nb\n/* one\ntwo */\n#include \"/x.h\""),
            "line 5: #include \"/x.h\" names an absolute path");
}

TEST(FindUnkeyedInclude, PassesRelativeNamesAndWhatThePreprocessorDoesNotSee) {
  for (const char *text :
       {"#include \"kjit/prelude.h\"", "#include <cuda_fp16.h>", "#include \"../common.h\"",
        "// #include \"/x.h\"", "/* #include \"/x.h\" */", "/*\n#include \"/x.h\"\n*/",
        "const char *s = \"#include \\\"/x.h\\\"\";", "#define include \"/x.h\"",
        "#includefoo \"/x.h\"", "#if A < B\n#endif", "int x = 1'000; // '\n#include \"ok.h\"",
        "// a comment \\\n#include \"/x.h\" continued into the comment"})
    EXPECT_EQ(find_unkeyed_include(text), "") << text;
  for (const char *text : {"// a comment \\\n\n#include \"/x.h\"", "// c \\\nc\n#include \"/x.h\""})
    EXPECT_EQ(find_unkeyed_include(text), "line 3: #include \"/x.h\" names an absolute path")
        << text;
}

} // namespace
} // namespace kjit::templates
