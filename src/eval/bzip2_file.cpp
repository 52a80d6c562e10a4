#include "eval/bzip2_file.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "bifocal/error.h"

extern char** environ;

namespace bifocal::eval {

namespace {

// Closes a file descriptor when it goes out of scope.
class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

}  // namespace

std::string read_bzip2_file(const std::filesystem::path& file) {
  const std::string where = file.string();
  if (!std::filesystem::exists(file)) fail(where, "file not found");
  if (::access(file.c_str(), R_OK) != 0) fail(where, "cannot open file");

  std::array<int, 2> pipe_ends{};
  if (::pipe2(pipe_ends.data(), O_CLOEXEC) != 0) fail(where, std::string("cannot create a pipe: ") + std::strerror(errno));
  OwnedFd read_end(pipe_ends[0]);
  OwnedFd write_end(pipe_ends[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::string program = "bzip2", decompress = "-dc", end_of_options = "--", path = file.string();
  std::array<char*, 5> argv{program.data(), decompress.data(), end_of_options.data(), path.data(), nullptr};
  pid_t child = 0;
  const int spawned = ::posix_spawnp(&child, "bzip2", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    fail(where, "cannot decompress: running `bzip2` failed (" + std::string(std::strerror(spawned)) +
                    "); install bzip2, or decompress the file next to it with `bzip2 -dk`");
  write_end.reset();  // the child holds its own copy; EOF arrives when it exits

  std::string text;
  std::array<char, 1 << 16> buffer{};
  while (true) {
    const ssize_t got = ::read(read_end.get(), buffer.data(), buffer.size());
    if (got > 0) {
      text.append(buffer.data(), std::size_t(got));
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      const int error = errno;
      ::waitpid(child, nullptr, 0);
      fail(where, std::string("cannot read bzip2's output: ") + std::strerror(error));
    }
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    fail(where, "cannot decompress: the `bzip2` program was not found; install bzip2, or decompress the file "
                "next to it with `bzip2 -dk`");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail(where, "bzip2 could not decompress it (exit status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "): not bzip2 data, or truncated");
  return text;
}

}  // namespace bifocal::eval
