#include <c10/util/Exception.h>
void load_draft_weights(int hidden) {
  TORCH_CHECK(hidden == 7168, "draft model hidden size ", hidden, " does not match the target's 7168");
}
int main() { load_draft_weights(4096); }
