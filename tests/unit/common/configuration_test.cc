#include "runtime/common/configuration.h"

#include <gtest/gtest.h>

#include <tuple>

namespace hccltune {
namespace {

TEST(Configuration, ParseFillsDefaultsAndPrintsCanonically) {
  auto c = Configuration::Parse("ring");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ToString(), "ring(chunk=512K,channels=1,link=auto)");
  auto d = Configuration::Parse(" ring ( link = shm , chunk=1024K ) ");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->ToString(), "ring(chunk=1M,channels=1,link=shm)");
  EXPECT_EQ(d->chunk, 1u << 20);
}

TEST(Configuration, ConventionsExamples) {
  auto c = Configuration::Parse("ring(chunk=1M,channels=2,link=shm)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ToString(), "ring(chunk=1M,channels=2,link=shm)");
  auto h = Configuration::Parse(
      "hierarchical(intra=ring(link=shm),inter=halving_doubling(chunk=256K,link=tcp@10.20.0.0/16))");
  // halving_doubling has no chunk parameter in the catalogue.
  EXPECT_FALSE(h.ok());
  auto h2 = Configuration::Parse("hierarchical(intra=ring(link=shm),inter=halving_doubling(link=tcp@10.20.0.0/16))");
  ASSERT_TRUE(h2.ok()) << h2.status();
  EXPECT_EQ(h2->ToString(),
            "hierarchical(intra=ring(chunk=512K,channels=1,link=shm),"
            "inter=halving_doubling(channels=1,link=tcp@10.20.0.0/16))");
  EXPECT_EQ(h2->inter->link.kind, LinkKind::kTcp);
  EXPECT_EQ(h2->inter->link.network, "10.20.0.0/16");
}

TEST(Configuration, EveryCatalogueEntryRoundTrips) {
  for (const AlgorithmSpec& spec : AlgorithmCatalogue()) {
    auto d = Configuration::Default(spec.name);
    ASSERT_TRUE(d.ok()) << spec.name;
    const std::string text = d->ToString();
    auto again = Configuration::Parse(text);
    ASSERT_TRUE(again.ok()) << text << ": " << again.status();
    EXPECT_EQ(again->ToString(), text);
    EXPECT_EQ(*again, *d);
  }
}

// A hierarchical form is printed only when it is not auto, so strings stored before it existed stay canonical.
TEST(Configuration, HierarchicalFormParsesAndPrints) {
  const std::string steps = "intra=ring(chunk=512K,channels=1,link=auto),inter=ring(chunk=512K,channels=1,link=auto)";
  for (const auto& [text, form, canonical] :
       {std::tuple{"hierarchical", HierForm::kAuto, "hierarchical(" + steps + ")"},
        std::tuple{"hierarchical(form=auto)", HierForm::kAuto, "hierarchical(" + steps + ")"},
        std::tuple{"hierarchical(form=Leader)", HierForm::kLeader, "hierarchical(" + steps + ",form=leader)"},
        std::tuple{"hierarchical(inter=direct,form=parallel)", HierForm::kParallel,
                   std::string("hierarchical(intra=ring(chunk=512K,channels=1,link=auto),inter=direct(channels=1,"
                               "link=auto),form=parallel)")}}) {
    auto c = Configuration::Parse(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->form, form) << text;
    EXPECT_EQ(c->ToString(), canonical) << text;
    EXPECT_EQ(*Configuration::Parse(c->ToString()), *c) << text;
  }
  EXPECT_FALSE(*Configuration::Parse("hierarchical(form=leader)") == *Configuration::Parse("hierarchical"));
  EXPECT_FALSE(*Configuration::Parse("hierarchical(form=leader)") ==
               *Configuration::Parse("hierarchical(form=parallel)"));
}

TEST(Configuration, EqualExactlyWhenCanonicalStringsAre) {
  EXPECT_EQ(*Configuration::Parse("ring(chunk=1M)"), *Configuration::Parse("ring(chunk=1024K,channels=1)"));
  EXPECT_FALSE(*Configuration::Parse("ring(chunk=1M)") == *Configuration::Parse("ring(chunk=2M)"));
}

TEST(Configuration, ErrorsNamePositionAndAccepted) {
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      {"rnig", "unknown algorithm 'rnig'"},
      {"ring(chnk=1M)", "unknown parameter 'chnk' for ring; accepted: chunk, channels, link"},
      {"ring(chunk=0)", "chunk must be a positive byte size"},
      {"ring(channels=99)", "channels must be an integer from 1 to 16"},
      {"ring(link=nvlink)", "unknown link 'nvlink'"},
      {"ring(link=tcp@eth0)", "subnet"},
      {"ring(link=shm@1.2.3.0/24)", "only tcp, ucx, roce and ib"},
      {"ring(chunk=1M", "expected ',' or ')'"},
      {"ring(chunk=1M,chunk=2M)", "given twice"},
      {"ring(chunk 1M)", "expected '='"},
      {"ring()x", "trailing"},
      {"hierarchical(intra=hierarchical)", "cannot nest"},
      {"dissemination(chunk=1M)", "accepted: link"},
      {"hierarchical(form=tree)", "unknown form 'tree'; accepted: auto, parallel, leader"},
      {"ring(form=leader)", "unknown parameter 'form' for ring"},
  };
  for (const auto& c : cases) {
    auto r = Configuration::Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << c.text << " -> " << r.status();
    EXPECT_NE(r.status().message().find(" at "), std::string::npos) << r.status();
  }
}

TEST(Link, ParseAndFormat) {
  EXPECT_EQ(FormatLink(*ParseLink("TCP@10.0.0.0/8")), "tcp@10.0.0.0/8");
  EXPECT_EQ(ParseLink("roce")->kind, LinkKind::kRoce);
  EXPECT_EQ(ParseLink("ucx")->kind, LinkKind::kUcx);
  EXPECT_EQ(FormatLink(*ParseLink("UCX@10.77.1.0/24")), "ucx@10.77.1.0/24");
  EXPECT_FALSE(ParseLink("ucx@eth0").ok());
  EXPECT_EQ(ParseLink("ib")->kind, LinkKind::kIb);
  EXPECT_EQ(FormatLink(*ParseLink("IB@10.40.1.0/24")), "ib@10.40.1.0/24");
  EXPECT_EQ(FormatLink(*ParseLink("roce@10.30.0.0/16")), "roce@10.30.0.0/16");
  EXPECT_FALSE(ParseLink("ib@mlx5_0").ok());  // a subnet, never a device name
  EXPECT_EQ(FormatLink(LinkSpec{}), "auto");
}

}  // namespace
}  // namespace hccltune
