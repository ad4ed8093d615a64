// The models of a run, each with its trajectory count (`qwen2.5-vl 13 · qwen3-vl 4`); the model
// names the records state, and what a model folder's loader defaulted, on hover. A model no profile
// covers says so once, in words.
import type { RunInfo } from '../../server/http/api.ts';

export function RunModels({ info }: { info: RunInfo }) {
  // An empty run (still loading, or nothing readable) names the profile it would check with.
  if (info.models.length === 0) return <span data-testid="run-models">model {info.profile.name}</span>;
  const one = info.models.length === 1;
  return (
    <span data-testid="run-models">
      {one ? 'model ' : 'models '}
      {info.models.map((m, i) => (
        <span
          key={m.profile}
          className="run-model"
          data-profile={m.profile}
          title={[...m.names, ...m.notes].join('\n') || undefined}
        >
          {i > 0 ? ' · ' : ''}
          {m.profile}
          {one ? '' : ` (${m.trajectories})`}
          {m.limitation && (
            <span className="run-model-limitation" data-testid="run-model-limitation">
              {` — ${m.limitation}`}
            </span>
          )}
        </span>
      ))}
    </span>
  );
}
