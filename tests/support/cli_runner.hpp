// Runs the dlock binary (DLOCK_CLI) as a user would: its own process, stdout
// and stderr captured in files, no DLOCK_URL or REDIS_URL from the test's
// environment.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "redis_server.hpp"

namespace dlock::test::cli {

using Clock = std::chrono::steady_clock;

inline std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

struct Running {
    pid_t pid;
    std::string out_path, err_path;
    Clock::time_point started;
    int stdin_fd = -1;
};

struct Finished {
    int code;
    std::string out, err;
    Clock::duration took;
};

inline std::string temp_path(const std::string& name) {
    static const std::string dir = [] {
        std::string pattern = "/tmp/dlock-cli-XXXXXX";
        return std::string(mkdtemp(pattern.data()));
    }();
    static int counter = 0;
    return dir + "/" + std::to_string(++counter) + "-" + name;
}

// env: variables set for the binary, after the ones dlock reads (DLOCK_URL, ...) are removed.
using Environment = std::vector<std::pair<std::string, std::string>>;

// What the program gets as stdin: /dev/null; a pipe whose write end the test
// keeps (Running::stdin_fd) until finish(); or nothing (descriptor 0 closed,
// as some daemons and careless parents start a child).
enum class Stdin { dev_null, pipe, closed };

// Starts program with args and stdin as asked.
inline Running start_program(const std::string& program, const std::vector<std::string>& args,
                             const Environment& env, Stdin stdin_kind) {
    Running r{0, temp_path("out"), temp_path("err"), Clock::now()};
    const bool stdin_pipe = stdin_kind == Stdin::pipe;
    int in[2] = {-1, -1};
    if (stdin_pipe && pipe2(in, O_CLOEXEC) != 0) return r;
    pid_t pid = fork();
    if (pid == 0) {
        int out = open(r.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int err = open(r.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int input = stdin_pipe ? in[0] : open("/dev/null", O_RDONLY);
        dup2(input, 0);
        dup2(out, 1);
        dup2(err, 2);
        if (stdin_kind == Stdin::closed) close(0);
        std::vector<char*> argv{const_cast<char*>(program.c_str())};
        for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        for (const char* name : {"DLOCK_URL", "REDIS_URL", "DLOCK_USER", "DLOCK_PASSWORD", "REDISCLI_AUTH"}) unsetenv(name);
        for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
        execvp(program.c_str(), argv.data());
        _exit(126);
    }
    if (stdin_pipe) {
        close(in[0]);
        r.stdin_fd = in[1];
    }
    r.pid = pid;
    return r;
}

inline Running start(const std::vector<std::string>& args, const Environment& env = {}) {
    return start_program(DLOCK_CLI, args, env, Stdin::dev_null);
}

// For `dlock hold`, which lets go when its stdin ends.
inline Running start_with_stdin_open(const std::vector<std::string>& args, const Environment& env = {}) {
    return start_program(DLOCK_CLI, args, env, Stdin::pipe);
}

inline Running start_with_stdin_closed(const std::vector<std::string>& args, const Environment& env = {}) {
    return start_program(DLOCK_CLI, args, env, Stdin::closed);
}

inline Finished finish(const Running& r) {
    if (r.stdin_fd >= 0) close(r.stdin_fd);
    int status = 0;
    waitpid(r.pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return {code, read_file(r.out_path), read_file(r.err_path), Clock::now() - r.started};
}

// A bash script, as a user would write one around dlock.
inline Finished dlock_cli_script(const std::string& script, const Environment& env = {}) {
    return finish(start_program("bash", {"-c", script}, env, Stdin::dev_null));
}

inline Finished dlock_cli(const std::vector<std::string>& args, const Environment& env = {}) {
    return finish(start(args, env));
}

// What starting the dlock binary and seeing it end costs here and now: a
// sanitizer build spends a large part of a second relocating and setting up,
// and a busy machine (tests side by side) adds more. A bound on how long a run
// took adds it, measured beside it, so that the bound tests how long dlock
// waited and not how fast the machine starts a process.
inline Clock::duration start_cost() { return dlock_cli({"--version"}).took; }

// A command that runs until the test opens its gate (a file appears), and at
// most a minute: a holder that still holds when the test looks, however slowly
// the test's next processes start (a `sleep 1` holder did not, under a
// sanitizer on a busy machine).
class Gate {
  public:
    Gate() : path_(temp_path("gate")) {}
    // A test that ends early (a failed ASSERT) lets its holders go too.
    ~Gate() { open(); }
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;
    // Shell text that waits for the gate, for a script of the test's own.
    std::string wait_in_shell() const {
        return "i=0; while [ ! -e " + path_ + " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done";
    }
    // The command's words, for after `--`: waits for the gate, then exits 0.
    std::vector<std::string> command() const { return {"sh", "-c", wait_in_shell()}; }
    void open() const { std::ofstream(path_).put('\n'); }

  private:
    std::string path_;
};

// `dlock run [args] -- <gate's command>`: the args for start().
inline std::vector<std::string> gated(std::vector<std::string> args, const Gate& gate) {
    args.push_back("--");
    for (auto& word : gate.command()) args.push_back(std::move(word));
    return args;
}

inline bool held(const dlock::support::RedisServer& server, const std::string& key) {
    return server.cli({"EXISTS", "dlock:{" + key + "}"}) == "1";
}

// Whether pid is a live process: not gone and not a zombie waiting to be reaped.
inline bool alive(pid_t pid) {
    auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto end_of_name = stat.rfind(')');
    if (end_of_name == std::string::npos || end_of_name + 2 >= stat.size()) return false;
    char state = stat[end_of_name + 2];
    return state != 'Z' && state != 'X';
}



}  // namespace dlock::test::cli
