import { StrictMode, useEffect } from 'react';
import { createRoot } from 'react-dom/client';
import { formatHash, parseHash, usePage, useRoute } from './stores/route.ts';
import { useLoadInfo, useRunLoading } from './stores/run.ts';
import { Overview } from './components/Overview.tsx';
import { openTrajectory, TrajectoryPage } from './components/TrajectoryPage.tsx';
import { PlaygroundPage } from './components/PlaygroundPage.tsx';
import { ComparePage } from './components/CompareView.tsx';
import { RunPage } from './components/RunPage.tsx';
import { AgainstPage } from './components/AgainstPage.tsx';
import { KeyHelp } from './components/KeyHelp.tsx';
import { installKeyboard } from './keyboard.ts';
import { api, sharedId } from './api.ts';
import './styles.css';

installKeyboard();

// A shared page holds one trajectory and no run: any other address shows that trajectory.
function keepToSharedTrajectory(): void {
  const id = sharedId();
  const r = useRoute.getState();
  if (id === null || (r.page === 'trajectory' && r.id === id)) return;
  history.replaceState(null, '', formatHash({ page: 'trajectory', id, params: {} }));
  useRoute.setState(parseHash(window.location.hash));
}
if (api.transport === 'static') {
  keepToSharedTrajectory();
  window.addEventListener('hashchange', keepToSharedTrajectory);
}

// A link to a trajectory: its data is asked for now, while React renders the page the first time.
const first = useRoute.getState();
if (first.page === 'trajectory' && first.id !== null) openTrajectory(first.id, first.params);

function App() {
  const page = usePage();
  const loadInfo = useLoadInfo();
  const loading = useRunLoading();
  useEffect(() => {
    void loadInfo();
  }, [loadInfo]);
  // Refresh the counts: every second while the server is still checking files, then every few
  // seconds (a run still being written grows; the views reload when the count changes).
  useEffect(() => {
    if (api.transport === 'static') return;
    const t = setInterval(() => void loadInfo(), loading ? 1000 : 3000);
    return () => clearInterval(t);
  }, [loading, loadInfo]);
  return (
    <>
      {page === 'compare' ? (
        <ComparePage />
      ) : page === 'run' ? (
        <RunPage />
      ) : page === 'against' ? (
        <AgainstPage />
      ) : page === 'trajectory' ? (
        <TrajectoryPage />
      ) : page === 'playground' ? (
        <PlaygroundPage />
      ) : (
        <Overview />
      )}
      <KeyHelp />
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
