// Tests of the tuning store's JSON Lines export / import and merge: the line format round trip, record shape
// checks, bad lines named by number, unreadable files, the faster record kept per key, and the majority merge of
// repeated shards.
#include "store_test_support.hpp"

using namespace store_test;

TEST_CASE("to_json_line / from_json_line round trip with sorted keys and say what is wrong") {
  Record record = make_record("sig \"quoted\"\nnewline");
  record.key.device_name = "Gerät";
  const std::string line = to_json_line(record);
  CHECK(line.find('\n') == std::string::npos);
  const auto parsed = nlohmann::json::parse(line);
  CHECK(parsed.dump() == line);  // nlohmann's default object is sorted: same text means sorted keys
  std::vector<std::string> keys;
  for (const auto& item : parsed.items()) keys.push_back(item.key());
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  CHECK(keys.size() == 23);
  check_same(from_json_line(line), record);

  auto error_for = [](const std::string& text) {
    try {
      from_json_line(text);
    } catch (const InvalidArgument& error) {
      return std::string(error.what());
    }
    return std::string("(accepted)");
  };
  nlohmann::json missing = parsed;
  missing.erase("sm_count");
  CHECK(error_for(missing.dump()).find("sm_count") != std::string::npos);
  nlohmann::json wrong = parsed;
  wrong["cc"] = "ninety";
  CHECK(error_for(wrong.dump()).find("\"cc\" must be an integer") != std::string::npos);
  wrong = parsed;
  wrong["features"] = {1, "x"};
  CHECK(error_for(wrong.dump()).find("features") != std::string::npos);
  CHECK(error_for("{\"family\": ").find("not valid JSON") != std::string::npos);
  // A number no double holds is an out_of_range error of the JSON parser, not a parse_error (found by
  // fuzz_cache_import: "99999E3990[4" ended the process).
  CHECK(error_for("99999E3990[4").find("not valid JSON") != std::string::npos);
  CHECK(error_for("{\"cc\": 1e999}").find("not valid JSON") != std::string::npos);
  CHECK(error_for("[1, 2]").find("not a JSON object") != std::string::npos);
}

TEST_CASE("check_record_shape accepts the edges and names each bad field") {
  CHECK(check_record_shape(make_record("ok")) == "");
  auto problem = [](auto&& change) {
    Record record = make_record("x");
    change(record);
    return check_record_shape(record);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(problem([](Record& r) { r.key.cc = 10; }) == "");
  CHECK(problem([](Record& r) { r.key.cc = 200; }) == "");
  CHECK(problem([](Record& r) { r.key.sm_count = 1; }) == "");
  CHECK(problem([](Record& r) { r.key.sm_count = 10000; }) == "");
  CHECK(problem([](Record& r) { r.default_time_us = 0; }) == "");
  CHECK(problem([](Record& r) { r.spread = 0; }) == "");
  CHECK(problem([](Record& r) { r.features.clear(); }) == "");

  const std::vector<std::pair<std::string, std::function<void(Record&)>>> bad = {
      {"family", [](Record& r) { r.key.family.clear(); }},
      {"template_hash", [](Record& r) { r.key.template_hash.clear(); }},
      {"signature", [](Record& r) { r.key.signature.clear(); }},
      {"device_name", [](Record& r) { r.key.device_name.clear(); }},
      {"config", [](Record& r) { r.config.clear(); }},
      {"nvrtc_version", [](Record& r) { r.key.nvrtc_version.clear(); }},
      {"cc", [](Record& r) { r.key.cc = 9; }},
      {"cc", [](Record& r) { r.key.cc = 201; }},
      {"sm_count", [](Record& r) { r.key.sm_count = 0; }},
      {"sm_count", [](Record& r) { r.key.sm_count = 10001; }},
      {"time_us", [](Record& r) { r.time_us = 0; }},
      {"time_us", [](Record& r) { r.time_us = -1; }},
      {"time_us", [&](Record& r) { r.time_us = nan; }},
      {"time_us", [&](Record& r) { r.time_us = inf; }},
      {"default_time_us", [](Record& r) { r.default_time_us = -0.5; }},
      {"default_time_us", [&](Record& r) { r.default_time_us = nan; }},
      {"spread", [](Record& r) { r.spread = -0.1; }},
      {"spread", [&](Record& r) { r.spread = inf; }},
      {"reps", [](Record& r) { r.reps = 0; }},
      {"features", [&](Record& r) { r.features[1] = nan; }},
  };
  for (const auto& [field, change] : bad) {
    const std::string message = problem(change);
    INFO("field ", field, ": ", message);
    CHECK(message.rfind(field, 0) == 0);
  }
}

TEST_CASE("export_jsonl then import_jsonl into a fresh store gives the same records") {
  TempDir dir;
  Store original(dir / "a.db", OpenMode::kReadWrite);
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> uniform(1e-3, 1e4);
  for (int i = 0; i < 25; ++i) {
    Record record = make_record("sig" + std::to_string(i * 7 % 25), uniform(random));
    record.key.family = i % 2 == 0 ? "permute" : "elementwise";
    record.key.sm_count = 100 + i % 3;
    record.features = {uniform(random), uniform(random) * 1e-200, -uniform(random)};
    record.spread = uniform(random) / 1e4;
    original.put(record);
  }
  const fs::path out = dir / "exports/cache.jsonl";  // folder created by the export
  original.export_jsonl(out);
  original.export_jsonl(out);  // replacing an existing export works too

  const auto expected = original.records();
  const auto lines = read_lines(out);
  REQUIRE(lines.size() == expected.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    CHECK(lines[i] == to_json_line(expected[i]));  // records() order, sorted keys
    CHECK(nlohmann::json::parse(lines[i]).dump() == lines[i]);
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(out.parent_path()))
    files.push_back(entry.path().filename());
  CHECK(files == std::vector<std::string>{"cache.jsonl"});  // no temporary file left behind

  Store copy(dir / "b.db", OpenMode::kReadWrite);
  const ImportReport report = copy.import_jsonl(out, nullptr);
  CHECK(report.added == expected.size());
  CHECK(report.replaced == 0);
  CHECK(report.kept == 0);
  CHECK(report.rejected == 0);
  CHECK(report.issues.empty());
  const auto imported = copy.records();
  REQUIRE(imported.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) check_same(imported[i], expected[i]);

  // Importing the same file again changes nothing: every incoming record is as fast as the stored one.
  const ImportReport again = copy.import_jsonl(out, nullptr);
  CHECK(again.added == 0);
  CHECK(again.kept == expected.size());
}

TEST_CASE("import_jsonl rejects bad lines with their line numbers and takes the good ones") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  auto line_of = [](const Record& record) { return to_json_line(record); };
  nlohmann::json missing = nlohmann::json::parse(line_of(make_record("missing")));
  missing.erase("time_us");
  Record negative = make_record("negative");
  negative.time_us = -3;
  Record refused = make_record("refused");
  refused.config = "block=7";
  nlohmann::json wrong_type = nlohmann::json::parse(line_of(make_record("wrong")));
  wrong_type["reps"] = 2.5;
  const std::string text = line_of(make_record("good1")) + "\n" +  // 1
                           "{\"family\": \"permute\", \n" +        // 2 malformed
                           missing.dump() + "\n" +                 // 3
                           line_of(negative) + "\n" +              // 4
                           line_of(refused) + "\r\n" +             // 5 validator says no (CRLF line)
                           "\n" +                                  // 6 blank: skipped
                           line_of(make_record("good2")) + "\n" +  // 7
                           wrong_type.dump() + "\n";               // 8
  const fs::path in = dir / "in.jsonl";
  write_text(in, text);
  std::vector<std::string> validated;
  const RecordValidator validate = [&](const Record& record) -> std::string {
    validated.push_back(record.key.signature);
    return record.config == "block=7" ? "config block=7 is outside the permute space" : "";
  };
  const ImportReport report = store.import_jsonl(in, validate);
  CHECK(report.added == 2);
  CHECK(report.rejected == 5);
  CHECK(report.replaced == 0);
  CHECK(report.kept == 0);
  REQUIRE(report.issues.size() == 5);
  const std::vector<std::size_t> lines = {2, 3, 4, 5, 8};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO(report.issues[i].message);
    CHECK(report.issues[i].line == lines[i]);
    CHECK(report.issues[i].message.rfind("line " + std::to_string(lines[i]) + ": ", 0) == 0);
  }
  CHECK(report.issues[0].message.find("not valid JSON") != std::string::npos);
  CHECK(report.issues[1].message.find("\"time_us\"") != std::string::npos);
  CHECK(report.issues[2].message.find("time_us must be finite and > 0") != std::string::npos);
  CHECK(report.issues[3].message.find("outside the permute space") != std::string::npos);
  CHECK(report.issues[4].message.find("\"reps\"") != std::string::npos);
  // The validator only sees records whose shape is fine.
  CHECK(validated == std::vector<std::string>{"good1", "refused", "good2"});

  const auto records = store.records();
  REQUIRE(records.size() == 2);
  check_same(records[0], make_record("good1"));
  check_same(records[1], make_record("good2"));
}

TEST_CASE("a record whose device the cache knows under another compute capability is a fingerprint conflict") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  store.put(make_record("stored"));  // the store knows make_record's device at its cc
  const Record base = make_record("x");
  Record relabelled = make_record("relabelled");
  relabelled.key.cc = base.key.cc == 80 ? 90 : 80;
  Record other_device = make_record("other");
  other_device.key.device_name = "Some Other GPU";
  other_device.key.cc = relabelled.key.cc;
  Record other_again = other_device;  // agrees with the line before it
  other_again.key.signature = "other2";
  Record other_conflict = other_device;  // conflicts with the line before it, not with the store
  other_conflict.key.signature = "other3";
  other_conflict.key.cc = base.key.cc;
  Record fewer_sms = make_record("fewer_sms");  // the same model with another SM count is another key, not a conflict
  fewer_sms.key.sm_count = base.key.sm_count - 2;
  const fs::path in = dir / "in.jsonl";
  write_text(in, jsonl_of({relabelled, other_device, other_again, other_conflict, fewer_sms}));
  const ImportReport report = store.import_jsonl(in, nullptr);
  CHECK(report.added == 3);
  CHECK(report.rejected == 2);
  REQUIRE(report.issues.size() == 2);
  CHECK(report.issues[0].line == 1);
  CHECK(report.issues[0].message.find("fingerprint conflict") != std::string::npos);
  CHECK(report.issues[0].message.find(base.key.device_name) != std::string::npos);
  CHECK(report.issues[1].line == 4);
  CHECK(report.issues[1].message.find("earlier in this import") != std::string::npos);
  CHECK(store.records().size() == 4);  // nothing stored was touched
  // Merging a cache that holds the conflict is refused the same way.
  Store other(dir / "o.db", OpenMode::kReadWrite);
  other.put(relabelled);
  const ImportReport merged = store.merge_from(other, nullptr);
  CHECK(merged.rejected == 1);
  CHECK(merged.added == 0);
}

TEST_CASE("memory size and clocks are part of a device's fingerprint where both records have them") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  store.put(make_record("stored"));  // 81559 MiB, 1980 / 2619 MHz
  Record driver_reserve = make_record("driver_reserve");  // another driver reserves a little more memory: same model
  driver_reserve.memory_mb -= 300;
  Record unknown = make_record("unknown");  // an older record: fingerprint not recorded, never a conflict
  unknown.memory_mb = 0;
  unknown.sm_clock_mhz = 0;
  unknown.memory_clock_mhz = 0;
  Record more_memory = make_record("more_memory");  // a 94 GB part under the 80 GB part's name
  more_memory.memory_mb = 95830;
  Record slower = make_record("slower");  // a lower-clocked part (a PCIe card) under the SXM part's name
  slower.sm_clock_mhz = 1755;
  Record memory_clock = make_record("memory_clock");
  memory_clock.memory_clock_mhz = 1593;
  const fs::path in = dir / "in.jsonl";
  write_text(in, jsonl_of({driver_reserve, unknown, more_memory, slower, memory_clock}));
  const ImportReport report = store.import_jsonl(in, nullptr);
  CHECK(report.added == 2);
  CHECK(report.rejected == 3);
  REQUIRE(report.issues.size() == 3);
  CHECK(report.issues[0].line == 3);
  CHECK(report.issues[0].message.find("fingerprint conflict") != std::string::npos);
  CHECK(report.issues[0].message.find("memory 81559 MiB there, 95830 MiB here") != std::string::npos);
  CHECK(report.issues[1].message.find("SM clock 1980 MHz there, 1755 MHz here") != std::string::npos);
  CHECK(report.issues[2].message.find("memory clock 2619 MHz there, 1593 MHz here") != std::string::npos);
  CHECK(store.records().size() == 3);
  // A cache that knows the model only from records without a fingerprint takes the first one that has it, and
  // holds every later record to it.
  Store older(dir / "older.db", OpenMode::kReadWrite);
  older.put(unknown);
  CHECK(older.merge_from(store, nullptr).added == 2);  // stored and driver_reserve (unknown is already there)
  Store conflicting(dir / "c.db", OpenMode::kReadWrite);
  conflicting.put(more_memory);
  const ImportReport merged = older.merge_from(conflicting, nullptr);
  CHECK(merged.rejected == 1);
  CHECK(merged.added == 0);
}

TEST_CASE("a version-1 store: migrated in place read-write, read as it is read-only, nothing lost") {
  TempDir dir;
  const fs::path db = dir / "v1.db";
  // The first schema, as jitune 0.1.0 wrote it, with one record.
  run_sql(db,
          "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL,"
          " jitune_version TEXT NOT NULL);"
          "INSERT INTO schema_version VALUES (1, 1, '0.1.0');"
          "CREATE TABLE records (family TEXT NOT NULL, template_hash TEXT NOT NULL, signature TEXT NOT NULL,"
          " device_name TEXT NOT NULL, cc INTEGER NOT NULL, sm_count INTEGER NOT NULL, nvrtc_version TEXT NOT NULL,"
          " problem_group TEXT NOT NULL, features TEXT NOT NULL, config TEXT NOT NULL, time_us REAL NOT NULL,"
          " spread REAL NOT NULL, reps INTEGER NOT NULL, default_time_us REAL NOT NULL,"
          " default_config TEXT NOT NULL, jitune_version TEXT NOT NULL, driver_version INTEGER NOT NULL,"
          " created_at TEXT NOT NULL,"
          " PRIMARY KEY (family, template_hash, signature, device_name, cc, sm_count, nvrtc_version));"
          "CREATE INDEX records_by_group ON records (family, template_hash, problem_group, cc);"
          "CREATE TABLE measurements (family TEXT NOT NULL, template_hash TEXT NOT NULL, signature TEXT NOT NULL,"
          " device_name TEXT NOT NULL, cc INTEGER NOT NULL, sm_count INTEGER NOT NULL, nvrtc_version TEXT NOT NULL,"
          " config TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, time_us REAL NOT NULL,"
          " spread REAL NOT NULL, reps INTEGER NOT NULL, created_at TEXT NOT NULL,"
          " PRIMARY KEY (family, template_hash, signature, device_name, cc, sm_count, nvrtc_version, config));"
          "INSERT INTO records VALUES ('permute', 'tmpl-1', 'old', 'NVIDIA H100 80GB HBM3', 90, 132, '13.0',"
          " 'f32 rank3', '[1.5,2.0]', 'block=256', 12.5, 0.01, 21, 14.0, 'block=128', '0.1.0', 13000,"
          " '2026-11-21T19:40:00Z');");
  Record expected = make_record("old");
  expected.features = {1.5, 2.0};
  expected.config = "block=256";
  expected.spread = 0.01;
  expected.reps = 21;
  expected.default_time_us = 14.0;
  expected.default_config = "block=128";
  expected.driver_version = 13000;
  expected.memory_mb = expected.sm_clock_mhz = expected.memory_clock_mhz = 0;
  expected.host = expected.shard = "";
  const std::string before = read_bytes(db);
  {
    Store read_only(db, OpenMode::kReadOnly);  // read as it is: not migrated, not touched
    REQUIRE(read_only.records().size() == 1);
    check_same(read_only.records()[0], expected);
    CHECK(read_only.find_exact("permute", {"tmpl-1"}, "old", expected.key.device_name, 90, 132, "13.0").has_value());
  }
  CHECK(read_bytes(db) == before);
  {
    Store store(db, OpenMode::kReadWrite);  // migrated to the current schema in place
    REQUIRE(store.records().size() == 1);
    check_same(store.records()[0], expected);
    store.put(make_record("new"));
    // The migrated record has no fingerprint: the new one (which has) is no conflict, and both are kept.
    CHECK(store.records().size() == 2);
  }
  Store reopened(db, OpenMode::kReadOnly);
  REQUIRE(reopened.records().size() == 2);
  check_same(reopened.records()[0], make_record("new"));
  check_same(reopened.records()[1], expected);
}

TEST_CASE("a record without a fingerprint or provenance writes a line without those fields, and reads back the same") {
  Record bare = make_record("bare");
  bare.memory_mb = bare.sm_clock_mhz = bare.memory_clock_mhz = 0;
  bare.host.clear();
  bare.shard.clear();
  const nlohmann::json line = nlohmann::json::parse(to_json_line(bare));
  for (const char* name : {"memory_mb", "sm_clock_mhz", "memory_clock_mhz", "host", "shard"})
    CHECK_MESSAGE(!line.contains(name), name);
  check_same(from_json_line(to_json_line(bare)), bare);
  Record known = make_record("known");
  known.memory_mb = 81559;
  known.sm_clock_mhz = 1980;
  known.memory_clock_mhz = 2619;
  known.host = "node7";
  known.shard = "1/4";
  const nlohmann::json full = nlohmann::json::parse(to_json_line(known));
  CHECK(full["memory_mb"] == 81559);
  CHECK(full["sm_clock_mhz"] == 1980);
  CHECK(full["memory_clock_mhz"] == 2619);
  CHECK(full["host"] == "node7");
  CHECK(full["shard"] == "1/4");
  check_same(from_json_line(to_json_line(known)), known);
}

TEST_CASE("a record line without the fingerprint and provenance fields (an older export) reads as not recorded") {
  nlohmann::json line = nlohmann::json::parse(to_json_line(make_record("x")));
  for (const char* name : {"memory_mb", "sm_clock_mhz", "memory_clock_mhz", "host", "shard"}) line.erase(name);
  const Record r = from_json_line(line.dump());
  CHECK(r.memory_mb == 0);
  CHECK(r.sm_clock_mhz == 0);
  CHECK(r.memory_clock_mhz == 0);
  CHECK(r.host.empty());
  CHECK(r.shard.empty());
  line["sm_clock_mhz"] = -5;
  Record negative = from_json_line(line.dump());
  CHECK(check_record_shape(negative).find("sm_clock_mhz must be in 0..100000") != std::string::npos);
  line["sm_clock_mhz"] = "fast";
  CHECK_THROWS_WITH_AS(from_json_line(line.dump()), doctest::Contains("\"sm_clock_mhz\" must be an integer"),
                       InvalidArgument);
}

TEST_CASE("import_jsonl of a file that cannot be read writes nothing") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  store.put(make_record("kept"));
  const std::string missing = error_of([&] { store.import_jsonl(dir / "no-such.jsonl", nullptr); });
  CHECK(missing.find("no-such.jsonl") != std::string::npos);
  CHECK(missing.find("nothing was imported") != std::string::npos);
  CHECK_THROWS_AS(store.import_jsonl(dir.path(), nullptr), StoreError);  // a folder
  CHECK(store.records().size() == 1);
}

// make_record with a config of its own.
static Record with(const std::string& signature, double time_us, const std::string& config) {
  Record record = make_record(signature, time_us);
  record.config = config;
  return record;
}

// The stored record of make_key(signature), if any.
static std::optional<Record> find_stored(const Store& store, const std::string& signature) {
  const RecordKey key = make_key(signature);
  return store.find_exact(key.family, {key.template_hash}, key.signature, key.device_name, key.cc, key.sm_count,
                          key.nvrtc_version);
}

TEST_CASE("import_jsonl and merge_from: trusted, the faster record stays; untrusted, the stored one") {
  TempDir dir;
  const RecordValidator accept_all = [](const Record&) { return std::string(); };
  auto config_of = [](const Store& store, const std::string& signature) {
    const auto found = find_stored(store, signature);
    return found ? found->config + " " + std::to_string(found->time_us) : std::string("none");
  };

  SUBCASE("import_jsonl") {
    Store store(dir / "s.db", OpenMode::kReadWrite);
    store.put(with("slow", 12.3, "block=128"));
    store.put(with("fast", 5.0, "block=64"));
    const fs::path in = dir / "in.jsonl";
    write_text(in, to_json_line(with("new", 7.0, "block=32")) + "\n" +
                       to_json_line(with("slow", 10.1, "block=256")) + "\n" +
                       to_json_line(with("fast", 6.0, "block=512")) + "\n");
    {  // untrusted (the default), into a second store holding the same records: a stored record always stays
      Store untrusted(dir / "u.db", OpenMode::kReadWrite);
      untrusted.put(with("slow", 12.3, "block=128"));
      untrusted.put(with("fast", 5.0, "block=64"));
      const ImportReport kept = untrusted.import_jsonl(in, accept_all);
      CHECK(kept.added == 1);
      CHECK(kept.replaced == 0);
      CHECK(kept.kept == 2);
      REQUIRE(kept.issues.size() == 1);  // "slow": the incoming claim is faster, so the report says how to take it
      CHECK(kept.issues[0].line == 2);
      CHECK(kept.issues[0].message.find("kept the stored permute [slow]") != std::string::npos);
      CHECK(kept.issues[0].message.find("--trust") != std::string::npos);
      CHECK(config_of(untrusted, "slow") == "block=128 " + std::to_string(12.3));
      CHECK(config_of(untrusted, "new") == "block=32 " + std::to_string(7.0));
    }
    const ImportReport report = store.import_jsonl(in, accept_all, true);
    CHECK(report.added == 1);
    CHECK(report.replaced == 1);
    CHECK(report.kept == 1);
    CHECK(report.rejected == 0);
    REQUIRE(report.issues.size() == 1);
    CHECK(report.issues[0].line == 2);
    INFO(report.issues[0].message);
    CHECK(report.issues[0].message.find("replaced permute [slow]") != std::string::npos);
    CHECK(report.issues[0].message.find("12.3 us -> 10.1 us") != std::string::npos);
    CHECK(config_of(store, "slow") == "block=256 " + std::to_string(10.1));
    CHECK(config_of(store, "fast") == "block=64 " + std::to_string(5.0));
    CHECK(config_of(store, "new") == "block=32 " + std::to_string(7.0));
  }
  SUBCASE("merge_from") {
    Store store(dir / "s.db", OpenMode::kReadWrite);
    store.put(with("slow", 12.3, "block=128"));
    store.put(with("fast", 5.0, "block=64"));
    Store other(dir / "other.db", OpenMode::kReadWrite);
    other.put(with("slow", 10.1, "block=256"));
    other.put(with("fast", 6.0, "block=512"));
    other.put(with("new", 7.0, "block=32"));
    other.put(with("refused", 1.0, "block=7"));
    Store other_read_only(dir / "other.db", OpenMode::kReadOnly);
    const ImportReport report = store.merge_from(
        other_read_only,
        [](const Record& record) {
          return record.config == "block=7" ? std::string("config outside the space") : std::string();
        },
        true);
    CHECK(report.added == 1);
    CHECK(report.replaced == 1);
    CHECK(report.kept == 1);
    CHECK(report.rejected == 1);
    REQUIRE(report.issues.size() == 2);
    std::string all_messages;
    for (const auto& issue : report.issues) {
      CHECK(issue.line == 0);
      all_messages += issue.message + "\n";
    }
    INFO(all_messages);
    CHECK(all_messages.find("12.3 us -> 10.1 us") != std::string::npos);
    CHECK(all_messages.find("config outside the space") != std::string::npos);
    CHECK(config_of(store, "slow") == "block=256 " + std::to_string(10.1));
    CHECK(config_of(store, "fast") == "block=64 " + std::to_string(5.0));
    CHECK(config_of(store, "refused") == "none");
    CHECK(store.records().size() == 3);

    const ImportReport self =
        store.merge_from(store, nullptr);  // merging a store into itself changes nothing
    CHECK(self.kept == 3);
    CHECK(self.added + self.replaced + self.rejected == 0);
  }
}

TEST_CASE("majority_record: the config most repeats chose within the noise bound, its fastest record") {
  auto rec = [](const std::string& config, double time_us) {
    Record record = make_record("p", time_us);
    record.config = config;
    return record;
  };
  int votes = 0;
  // Three shards: two chose A (10.2, 10.4 us), one chose B, the fastest by 1% (a noise win): A stays.
  std::vector<Record> repeats = {rec("A", 10.2), rec("B", 10.1), rec("A", 10.4)};
  const Record& a = majority_record(repeats, 0.03, &votes);
  CHECK(a.config == "A");
  CHECK(a.time_us == 10.2);  // the fastest record of the winning config
  CHECK(votes == 2);
  // B faster by more than the noise bound: A's votes do not count (its best time is out of the bound).
  repeats = {rec("A", 10.2), rec("B", 9.0), rec("A", 10.4)};
  CHECK(majority_record(repeats, 0.03, &votes).config == "B");
  CHECK(votes == 1);
  // With no noise allowed only the fastest config competes; with a wide bound the majority wins.
  repeats = {rec("A", 10.2), rec("B", 10.1), rec("A", 10.4)};
  CHECK(majority_record(repeats, 0.0).config == "B");
  CHECK(majority_record(repeats, 0.2).config == "A");
  // A tie in votes goes to the faster config; a single record is its own majority.
  repeats = {rec("A", 10.2), rec("B", 10.1)};
  CHECK(majority_record(repeats, 0.05).config == "B");
  repeats = {rec("C", 3.0)};
  CHECK(majority_record(repeats, 0.03, &votes).config == "C");
  CHECK(votes == 1);
}

TEST_CASE("merge_majority: repeated shards vote per key with the stored record; nothing stored is lost") {
  TempDir dir;
  const RecordValidator reject_block7 = [](const Record& record) {
    return record.config == "block=7" ? std::string("config outside the space") : std::string();
  };
  auto config_of = [](const Store& store, const std::string& signature) {
    const auto found = find_stored(store, signature);
    return found ? found->config : std::string("none");
  };
  Store store(dir / "s.db", OpenMode::kReadWrite);
  store.put(with("noisy", 10.0, "block=128"));   // two shards beat it by 1% with another config: they win
  store.put(with("steady", 8.0, "block=64"));    // the shards agree with it: kept
  store.put(with("only_here", 5.0, "block=32"));  // no shard tuned it: untouched
  Store s1(dir / "1.db", OpenMode::kReadWrite), s2(dir / "2.db", OpenMode::kReadWrite),
      s3(dir / "3.db", OpenMode::kReadWrite);
  s1.put(with("noisy", 9.9, "block=256"));
  s2.put(with("noisy", 9.95, "block=256"));
  s3.put(with("noisy", 9.5, "block=512"));  // fastest, but 4% ahead of block=256 and alone
  s1.put(with("steady", 7.9, "block=1024"));
  s2.put(with("steady", 8.1, "block=64"));
  s3.put(with("steady", 8.05, "block=64"));
  s1.put(with("new", 4.0, "block=16"));
  s2.put(with("refused", 1.0, "block=7"));
  const ImportReport report = store.merge_majority({&s1, &s2, &s3}, reject_block7, 0.05);
  std::string all;
  for (const auto& issue : report.issues) all += issue.message + "\n";
  INFO(all);
  CHECK(report.added == 1);     // new
  CHECK(report.replaced == 1);  // noisy
  CHECK(report.kept == 1);      // steady
  CHECK(report.rejected == 1);  // refused
  CHECK(config_of(store, "noisy") == "block=256");
  CHECK(config_of(store, "steady") == "block=64");
  CHECK(config_of(store, "only_here") == "block=32");
  CHECK(config_of(store, "new") == "block=16");
  CHECK(config_of(store, "refused") == "none");
  CHECK(all.find("majority: permute [noisy]") != std::string::npos);
  CHECK(all.find("chosen by 2 of 4 records within 5% of the fastest") != std::string::npos);
  CHECK(all.find("replaced permute [noisy]") != std::string::npos);
  CHECK(all.find(": 10 us -> 9.9 us (block=256)") != std::string::npos);
  CHECK(all.find("config outside the space") != std::string::npos);
  CHECK(store.records().size() == 4);
  // The same merge again changes nothing: every key's majority is what is stored now.
  const ImportReport again = store.merge_majority({&s1, &s2, &s3}, reject_block7, 0.05);
  CHECK(again.kept == 3);
  CHECK(again.added + again.replaced == 0);
  CHECK_THROWS_AS(store.merge_majority({&s1}, nullptr, 1.5), InvalidArgument);
  Store read_only(dir / "s.db", OpenMode::kReadOnly);
  CHECK_THROWS_AS(read_only.merge_majority({&s1}, nullptr, 0.03), StoreError);
}

TEST_CASE("import limits: deep nesting, long lines, long fields and many features are rejected line by line") {
  // 160 KB of '[' crashed the importer once (recursion while printing the value); now it is a plain rejection.
  CHECK_THROWS_WITH_AS(from_json_line(std::string(160000, '[')), doctest::Contains("the limit is 65536"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_json_line(std::string(30000, '[')), doctest::Contains("nested deeper than 8"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_json_line("{\"a\": " + std::string(9, '[') + std::string(9, ']') + "}"),
                       doctest::Contains("nested deeper than 8"), InvalidArgument);
  Record bracketed = make_record("sig [[[[[[[[[[[[ \"{{{{{{{{{{ \\\\");  // brackets inside strings do not count
  check_same(from_json_line(to_json_line(bracketed)), bracketed);

  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  Record long_field = make_record(std::string(kMaxFieldBytes + 1, 's'));
  Record at_limit = make_record(std::string(kMaxFieldBytes, 't'));
  Record long_line = make_record("long line");
  long_line.config = std::string(kMaxLineBytes, 'c');
  Record many_features = make_record("many features");
  many_features.features.assign(kMaxFeatures + 1, 1.0);
  nlohmann::json scalar_config = nlohmann::json::parse(to_json_line(make_record("scalar")));
  scalar_config["config"] = nlohmann::json::array({std::string(500, 'x')});  // quoted in the message, cut short
  const std::string text = to_json_line(make_record("good1")) + "\n" +  // 1
                           std::string(160000, '[') + "\n" +              // 2
                           std::string(30000, '{') + "\n" +               // 3
                           to_json_line(long_field) + "\n" +              // 4
                           to_json_line(long_line) + "\n" +               // 5
                           to_json_line(many_features) + "\n" +           // 6
                           scalar_config.dump() + "\n" +                  // 7
                           to_json_line(at_limit) + "\n" +                // 8
                           to_json_line(make_record("good2")) + "\n";     // 9
  const fs::path in = dir / "in.jsonl";
  write_text(in, text);
  const ImportReport report = store.import_jsonl(in, nullptr);
  CHECK(report.added == 3);
  REQUIRE(report.issues.size() == 6);
  const std::vector<std::pair<std::size_t, std::string>> expected = {
      {2, "bytes long; the limit is 65536"}, {3, "nested deeper than 8"}, {4, "16385 bytes long; the limit is 16384"},
      {5, "the limit is 65536"},             {6, "has 65 entries; the limit is 64"}, {7, "\"config\" must be a string"}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(report.issues[i].message.substr(0, 300));
    CHECK(report.issues[i].line == expected[i].first);
    CHECK(report.issues[i].message.find(expected[i].second) != std::string::npos);
    CHECK(report.issues[i].message.size() < 400);  // a bad value is never copied whole into the message
  }
  CHECK(store.records().size() == 3);
}

TEST_CASE("import reads only regular files within the size limit; export replaces only regular files") {
  TempDir dir;
  Store store(dir / "s.db", OpenMode::kReadWrite);
  store.put(make_record("kept"));
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A FIFO would block an open() for reading until a writer came: refused before it is opened.
  CHECK_THROWS_WITH_AS(store.import_jsonl(fifo, nullptr), doctest::Contains("not a regular file"), StoreError);
  const fs::path huge = dir / "huge.jsonl";
  write_text(huge, "");
  fs::resize_file(huge, kMaxImportBytes + 1);  // sparse: nothing is written
  CHECK_THROWS_WITH_AS(store.import_jsonl(huge, nullptr), doctest::Contains("the limit is 268435456"), StoreError);
  const fs::path good = dir / "good.jsonl";
  write_text(good, to_json_line(make_record("through a link")) + "\n");
  fs::create_symlink(good, dir / "link.jsonl");
  CHECK(store.import_jsonl(dir / "link.jsonl", nullptr).added == 1);  // reading through a link is fine
  CHECK(store.records().size() == 2);

  // Export: a FIFO and a folder are refused and left as they were.
  CHECK_THROWS_WITH_AS(store.export_jsonl(fifo), doctest::Contains("not a regular file"), StoreError);
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  fs::create_directory(dir / "sub");
  CHECK_THROWS_WITH_AS(store.export_jsonl(dir / "sub"), doctest::Contains("it is a folder"), StoreError);
  CHECK_THROWS_WITH_AS(store.export_jsonl(fifo), doctest::Contains("nothing was written"), StoreError);
  CHECK(fs::is_empty(dir / "sub"));
  // A symbolic link: refused without replace_symlink (the link and its target untouched); with it, the link
  // itself becomes a regular file and the target is still untouched.
  const fs::path target = dir / "target.txt", link = dir / "out.jsonl";
  write_text(target, "precious\n");
  fs::create_symlink(target, link);
  CHECK_THROWS_WITH_AS(store.export_jsonl(link), doctest::Contains("--force"), StoreError);
  CHECK(fs::is_symlink(link));
  store.export_jsonl(link, true);
  CHECK_FALSE(fs::is_symlink(link));
  CHECK(read_lines(link).size() == 2);
  CHECK(read_bytes(target) == "precious\n");
  // A regular file is replaced as before.
  store.export_jsonl(link);
  CHECK(read_lines(link).size() == 2);
}

TEST_CASE("an import's memory is bounded: records per file and rejected lines reported one by one") {
  TempDir dir;
  // 1500 bad lines around two good ones: every bad line counts, the first 1000 are listed, then a summary.
  std::string text = to_json_line(make_record("good1")) + "\n";
  for (int i = 0; i < 1500; ++i) text += "not json " + std::to_string(i) + "\n";
  text += to_json_line(make_record("good2")) + "\n";
  const auto in = dir / "many_bad.jsonl";
  write_text(in, text);
  Store store(dir / "s.db", OpenMode::kReadWrite);
  const ImportReport report = store.import_jsonl(in, [](const Record&) { return std::string(); });
  CHECK(report.added == 2);
  CHECK(report.rejected == 1500);
  REQUIRE(report.issues.size() == kMaxReportedIssues + 1);
  CHECK(report.issues[0].message.rfind("line 2: rejected: ", 0) == 0);
  CHECK(report.issues.back().message == "500 more lines were rejected (the first 1000 are listed)");
  // More records than the limit: nothing is read, the message says to split the file.
  std::string four;
  for (int i = 0; i < 4; ++i) four += to_json_line(make_record("r" + std::to_string(i))) + "\n";
  const auto big = dir / "four.jsonl";
  write_text(big, four);
  CHECK(read_jsonl(big, 4).records.size() == 4);
  CHECK_THROWS_WITH_AS(read_jsonl(big, 3), doctest::Contains("more than 3 records (line 4)"), StoreError);
}
