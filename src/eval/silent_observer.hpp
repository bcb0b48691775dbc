// An observer that reports nothing (`--progress none`): the evaluation's result is its traces alone.
#pragma once

#include "eval/observer.hpp"

namespace d2k {

class SilentObserver final : public EvalObserver {};

}  // namespace d2k
