#include <unistd.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "bifocal/error.h"
#include "commands.h"

namespace bifocal::cli {

std::string read_prompt(const std::string& prompt, const std::string& prompt_file) {
  if (!prompt.empty() && !prompt_file.empty()) fail("--prompt", "give either --prompt or --prompt-file, not both");
  std::string text;
  if (!prompt_file.empty() && prompt_file != "-") {
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) fail(prompt_file, "cannot read prompt file");
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  } else if (prompt == "-" || prompt_file == "-" || (prompt.empty() && !isatty(STDIN_FILENO))) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    text = prompt;
  }
  if (text.empty()) fail("prompt", "empty prompt (give --prompt TEXT, --prompt-file FILE, or text on standard input)");
  return text;
}

}  // namespace bifocal::cli
