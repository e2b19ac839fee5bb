#include "commands.h"

#include "core/duration.h"
#include "core/url.h"

#include <dlock/dlock.h>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace dlock::cli {

namespace {

// $XDG_RUNTIME_DIR as the plain absolute path the file backend takes:
// "/run/user/1000/" and "/run/user//1000" name "/run/user/1000". Empty when
// it is unset, relative, climbs with "..", or is "/" itself (the root
// directory is nobody's runtime directory): the caller falls back to /tmp.
std::string runtime_dir() {
  const char* env = std::getenv("XDG_RUNTIME_DIR");
  if (!env || *env != '/') return "";
  std::string dir;
  for (std::string_view rest = env; !rest.empty();) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") return "";
    dir += '/';
    dir += segment;
  }
  return dir;
}

// The default store's directory when something of another user's is there
// already: then nothing of ours may go in it (the file backend would refuse
// it, or not be let in), and the message says whose it is and what to do
// instead. Throws CLI::ValidationError (it runs while the command line is
// checked); returns if the path is free or ours.
void check_default_directory(const std::string& url) {
  const std::string dir = url.substr(std::string_view("file://").size());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || st.st_uid == ::geteuid()) return;
  std::string owner = "uid " + std::to_string(st.st_uid);
  if (const passwd* pw = ::getpwuid(st.st_uid); pw && pw->pw_name) owner += ", user " + std::string(pw->pw_name);
  throw CLI::ValidationError("the default store '" + dir + "' belongs to another user (" + owner +
                             "), so this user's locks can't be kept there; set XDG_RUNTIME_DIR to a directory of your "
                             "own (its dlock/ holds the locks), or choose a store with --backend (or DLOCK_BACKEND), "
                             "e.g. --backend file:///path/you/own");
}

}  // namespace

std::string default_backend() {
  if (const char* env = std::getenv("DLOCK_BACKEND"); env && *env) return env;
  if (const std::string run = runtime_dir(); !run.empty()) return "file://" + run + "/dlock";
  return "file:///tmp/dlock-" + std::to_string(::getuid());
}

std::string store_url(const std::string& backend, bool given) {
  if (given && backend.empty())
    throw CLI::ValidationError("--backend: empty; give a store URL (file:///dir, sqlite:///file.db, redis://host, "
                               "...) or leave --backend out for the default store");
  const std::string url = given ? backend : default_backend();
  const char* env = std::getenv("DLOCK_BACKEND");
  const std::string source = given ? "--backend" : env && *env ? "DLOCK_BACKEND" : "the default store";
  auto parsed = detail::parse_url(url);
  if (!parsed) throw CLI::ValidationError(source + ": " + parsed.status().message());
  if (!given && !(env && *env)) check_default_directory(url);
  // Every process of this host may read a command line (/proc/<pid>/cmdline).
  if (given && parsed->password)
    std::fprintf(stderr,
                 "dlock: warning: the password in --backend can be read by every user of this host (ps); give the "
                 "URL in DLOCK_BACKEND, or the password in a file with ?password_file=PATH\n");
  std::string schemes;
  for (const std::string& scheme : dlock::backends()) {
    if (scheme == parsed->scheme) return url;
    schemes += (schemes.empty() ? "" : ", ") + scheme;
  }
  throw CLI::ValidationError(source + ": unknown scheme '" + parsed->scheme + "' (this dlock has " + schemes + ")");
}

std::string printable_url(const std::string& url) { return detail::printable_url(url); }

std::chrono::milliseconds duration_arg(const std::string& text, std::string_view option) {
  auto d = detail::parse_duration(text, option);
  if (!d) throw CLI::ValidationError(d.status().message());
  return *d;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

namespace {

// The code point UTF-8 starts with at `s[at]` and its length in bytes;
// length 0 if the bytes there are not UTF-8 (overlong, surrogate, cut short).
std::pair<char32_t, std::size_t> decode_utf8(std::string_view s, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  const std::size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 0;
  if (length == 0 || at + length > s.size()) return {0, 0};
  char32_t c = lead & (0x7f >> length);
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return {0, 0};
    c = (c << 6) | (byte(at + i) & 0x3f);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[length] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return {0, 0};
  return {c, length};
}

// Columns a code point takes on a terminal: 0 for combining marks and
// zero-width ones, 2 for the East Asian wide ranges (CJK, Hangul, full-width
// forms, emoji), else 1.
std::size_t columns(char32_t c) {
  if ((c >= 0x300 && c <= 0x36f) || (c >= 0x200b && c <= 0x200f) || (c >= 0xfe00 && c <= 0xfe0f)) return 0;
  if ((c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf) || (c >= 0xac00 && c <= 0xd7a3) ||
      (c >= 0xf900 && c <= 0xfaff) || (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
      (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1faff) || (c >= 0x20000 && c <= 0x3fffd))
    return 2;
  return 1;
}

}  // namespace

std::string terminal_text(std::string_view s) {
  std::string out;
  for (std::size_t at = 0; at < s.size();) {
    const auto [c, length] = decode_utf8(s, at);
    if (length == 0 || c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f)) {
      // A control character (or a byte that is not UTF-8), escaped: each
      // byte of it as \xNN.
      const std::size_t n = length ? length : 1;
      for (std::size_t i = 0; i < n; ++i) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[at + i]));
        out += buf;
      }
      at += n;
      continue;
    }
    if (c == '\\') out += '\\';  // so an escape in the text can't pass for one of ours
    out.append(s.substr(at, length));
    at += length;
  }
  return out;
}

std::size_t display_width(std::string_view s) {
  std::size_t width = 0;
  for (std::size_t at = 0; at < s.size();) {
    const auto [c, length] = decode_utf8(s, at);
    width += length ? columns(c) : 1;
    at += length ? length : 1;
  }
  return width;
}

std::string prometheus_label(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace dlock::cli
