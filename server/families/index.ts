// The family registry: every model family rollscope knows, in the order a model name is matched
// (docs/contributing.md, "Adding a model family"). One line per family; profiles, the checks and
// the CLI find families here and nowhere else.
import type { BuiltinModel, ModelFamily } from './family.ts';
import { gemma3 } from './gemma3/index.ts';
import { gemma4 } from './gemma4/family.ts';
import { glm } from './glm/family.ts';
import { kimi } from './kimi/family.ts';
import { qwen } from './qwen/index.ts';

export const FAMILIES = [qwen, gemma3, gemma4, glm, kimi] as const satisfies readonly ModelFamily[];

export type { ModelFamily };

/** The family a registry name (`qwen`) names. */
export function familyNamed(name: string): ModelFamily | undefined {
  return FAMILIES.find((f) => f.name === name);
}

/** The family whose config.json `model_type` this is. */
export function familyOfModelType(modelType: string): ModelFamily | undefined {
  return FAMILIES.find((f) => Object.hasOwn(f.modelTypes, modelType));
}

/** The family a model name as the data states it belongs to (`Qwen/Qwen3.5-9B` → Qwen). */
export function familyOfModelName(name: string): ModelFamily | undefined {
  const m = name.toLowerCase().replace(/_/g, '-');
  return FAMILIES.find((f) => f.claimsModelName(m));
}

/** Every built-in model, with its family. */
export const BUILTIN_MODELS: readonly { family: ModelFamily; model: BuiltinModel }[] = FAMILIES.flatMap((family) =>
  family.builtins.map((model) => ({ family: family as ModelFamily, model })),
);

/** The built-in model a name (`qwen2.5-vl`) names. */
export function builtinNamed(name: string): { family: ModelFamily; model: BuiltinModel } | undefined {
  return BUILTIN_MODELS.find((b) => b.model.name === name);
}

/** The built-in a model name as the data states it maps to, in the family that claims it. */
export function builtinForModelName(name: string): { family: ModelFamily; model: BuiltinModel } | undefined {
  const family = familyOfModelName(name);
  const builtin = family?.builtinFor(name);
  return builtin !== undefined ? builtinNamed(builtin) : undefined;
}
